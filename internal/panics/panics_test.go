package panics

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func recovered(where string, f func()) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = New(where, p)
		}
	}()
	f()
	return nil
}

func TestError(t *testing.T) {
	t.Parallel()
	err := recovered("loader of table users", func() { panic(io.EOF) })
	var pe *Error
	require.ErrorAs(t, err, &pe)
	require.Equal(t, io.EOF, pe.Value)
	require.ErrorIs(t, err, io.EOF, "an error panic value is unwrapped")
	require.True(t, strings.HasPrefix(err.Error(), "loader of table users panicked: EOF"), err.Error())
	require.Contains(t, string(pe.Stack), "panics_test.go", "the stack is the panicking goroutine's")

	err = recovered("", func() { panic("boom") })
	require.True(t, strings.HasPrefix(err.Error(), "panic: boom"), err.Error())
	require.Nil(t, errors.Unwrap(err), "a non-error value unwraps to nil")
}
