// Package panics turns a recovered panic into an error value, so that a handler's or a
// loader's panic reaches its caller as a result instead of taking the process down. The type
// is exported by bus and cache as PanicError (an alias), so both roles report panics alike.
package panics

import (
	"fmt"
	"runtime/debug"
)

// Error is a recovered panic: its value and the stack of the goroutine that panicked.
type Error struct {
	// Where names what panicked ("handler of kind email", "loader of table users"); it may
	// be empty.
	Where string
	// Value is what was passed to panic.
	Value any
	// Stack is the panicking goroutine's stack, as runtime/debug.Stack prints it.
	Stack []byte
}

// New records the panic value p with the current goroutine's stack; call it in the deferred
// function that recovered p.
func New(where string, p any) *Error {
	return &Error{Where: where, Value: p, Stack: debug.Stack()}
}

// Error says what panicked, with what, and where.
func (e *Error) Error() string {
	if e.Where == "" {
		return fmt.Sprintf("panic: %v\n\n%s", e.Value, e.Stack)
	}
	return fmt.Sprintf("%s panicked: %v\n\n%s", e.Where, e.Value, e.Stack)
}

// Unwrap returns the panic value when it is an error, so errors.Is sees through a panic
// raised with an error.
func (e *Error) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}
