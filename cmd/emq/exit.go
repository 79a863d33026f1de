package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/keys"
)

// Exit codes (documented in the package comment).
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2
	exitNotFound    = 3
	exitUnreachable = 4
	exitRefused     = 5
)

// exitError carries the exit code chosen for an error and the message shown.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usagef is a usage error (exit 2).
func usagef(format string, args ...any) error {
	return &exitError{exitUsage, fmt.Errorf(format, args...)}
}

// notFoundf is a not-found error (exit 3).
func notFoundf(format string, args ...any) error {
	return &exitError{exitNotFound, fmt.Errorf(format, args...)}
}

// refusedf is a refused or aborted command (exit 5).
func refusedf(format string, args ...any) error {
	return &exitError{exitRefused, fmt.Errorf(format, args...)}
}

// exitCode chooses the exit code of err: the tool's own kinds first, then the library's
// sentinels.
func exitCode(err error) int {
	var ee *exitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, bus.ErrNotFound), errors.Is(err, bus.ErrNoSchedule):
		return exitNotFound
	case errors.Is(err, bus.ErrState), errors.Is(err, bus.ErrBusy):
		return exitRefused
	case errors.Is(err, bus.ErrInvalid), errors.Is(err, cache.ErrInvalid), errors.Is(err, keys.ErrInvalid):
		return exitUsage
	case errors.Is(err, context.DeadlineExceeded), isConnError(err):
		return exitUnreachable
	}
	return exitFailure
}

// isConnError reports whether err is the connection failing rather than the server
// answering: a server that went away or stopped answering after the tool connected (a
// watch outliving its server) is unreachable (exit 4), as at connect time.
func isConnError(err error) bool {
	if _, ok := valkey.IsValkeyErr(err); ok {
		return false // the server answered an error
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, valkey.ErrClosing)
}
