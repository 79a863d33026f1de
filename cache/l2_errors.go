package cache

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// How the errors of L2 operations read: ErrL2 for what Valkey failed, the caller's own
// cancellation or deadline as the caller's, and ErrL2Timeout for an operation that ran past
// its table's timeout.

var (
	// ErrL2 is wrapped by every error that comes from a Valkey call (connection refused,
	// timeout, an error reply): the L2 tier, not the loader, failed. A caller's own
	// cancellation or deadline is not an L2 failure and does not wrap it.
	ErrL2 = errors.New("cache: L2")

	// ErrL2Timeout is wrapped (with ErrL2) by an L2 operation on the read path that ran past
	// the table's L2Timeout (tables.Spec.L2Timeout).
	ErrL2Timeout = errors.New("cache: L2 timeout")
)

// l2Error is a failed Valkey call: the operation, the key, and what the client said.
type l2Error struct {
	op, key string
	err     error
}

func (e *l2Error) Error() string   { return fmt.Sprintf("%v: %s %s: %v", ErrL2, e.op, e.key, e.err) }
func (e *l2Error) Unwrap() []error { return []error{ErrL2, e.err} }

func l2err(op, key string, err error) error { return &l2Error{op: op, key: key, err: err} }

// l2outcome classifies the error of one L2 operation that ran under op, a context derived
// from caller with its own timeout d: nil stays nil; when the caller's context ended (or its
// deadline was the one op ran into: the client may notice a deadline a moment before the
// context does), the error is the caller's (context.Canceled or its deadline), not an L2
// failure; when d ran out, it wraps ErrL2 and ErrL2Timeout (and not
// context.DeadlineExceeded, which would read as the caller's). Every other error is an L2
// failure as it came.
//
// A deadline the table set itself (a stale-on-error read's StaleTimeout, see withTableDeadline)
// is not the caller's: L2 not answering within it is an L2 timeout, which the breaker counts.
func l2outcome(caller, op context.Context, d time.Duration, err error) error {
	if err == nil {
		return nil
	}
	var le *l2Error
	if !errors.As(err, &le) {
		return err
	}
	if cerr := caller.Err(); cerr != nil {
		if tableDeadline(caller, cerr) {
			return fmt.Errorf("%w: %s %s: %w", ErrL2, le.op, le.key, ErrL2Timeout)
		}
		return fmt.Errorf("cache: %s %s: %w", le.op, le.key, cerr)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if cdl, ok := caller.Deadline(); ok {
		if odl, _ := op.Deadline(); !cdl.After(odl) && !tableDeadline(caller, context.DeadlineExceeded) {
			return fmt.Errorf("cache: %s %s: %w", le.op, le.key, context.DeadlineExceeded)
		}
	}
	return fmt.Errorf("%w: %s %s: %w after %v", ErrL2, le.op, le.key, ErrL2Timeout, d)
}

// tableDeadlineKey holds, in a context made by withTableDeadline, the caller's own context
// and the deadline the table set.
type tableDeadlineKey struct{}

type tableDeadlineVal struct {
	outer    context.Context
	deadline time.Time
}

// withTableDeadline is ctx with a deadline d from now that the table sets for itself, not the
// caller: l2outcome counts an L2 operation it cut short as an L2 timeout while ctx lives.
func withTableDeadline(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	deadline := time.Now().Add(d)
	return context.WithDeadline(context.WithValue(ctx, tableDeadlineKey{}, tableDeadlineVal{ctx, deadline}), deadline)
}

// tableDeadline reports whether cerr, ctx's error, is the deadline a table set
// (withTableDeadline) while the caller's own context is still live. A context derived with a
// deadline of its own (a fill's, detached from the read that started it) carries the value
// too, but not that deadline: its own is not the table's.
func tableDeadline(ctx context.Context, cerr error) bool {
	if !errors.Is(cerr, context.DeadlineExceeded) {
		return false
	}
	v, ok := ctx.Value(tableDeadlineKey{}).(tableDeadlineVal)
	if !ok || v.outer.Err() != nil {
		return false
	}
	dl, _ := ctx.Deadline()
	if !dl.Equal(v.deadline) {
		return false // not the table's deadline that ran out: the caller's, or a detached fill's own
	}
	return true
}
