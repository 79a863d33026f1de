package cache

import (
	"errors"
	"fmt"

	"github.com/echocache/echocache/internal/panics"
)

var (
	// ErrNotFound is what a loader returns for an id that does not exist, and what Get
	// returns for one. The table remembers it for its NegativeTTL.
	ErrNotFound = errors.New("cache: not found")

	// ErrClosed is returned by calls on a closed [Cache] or its tables.
	ErrClosed = errors.New("cache: closed")

	// ErrInvalid is wrapped by errors about a [Config] or an argument that is not valid;
	// the text names the field. Nothing was done.
	ErrInvalid = errors.New("cache: invalid")

	// ErrLoaderTimeout matches (errors.Is) a [LoadError] whose loader ran past the table's
	// LoaderTimeout.
	ErrLoaderTimeout = errors.New("cache: loader timeout")
)

// LoadError is a failed loader call: the loader returned an error, timed out, or panicked
// (then Err is a *[PanicError]). Nothing is cached for a failed load; the next Get calls
// the loader again.
type LoadError struct {
	Table   string
	ID      string // the id in its row-key form; for a batch, the first id of the batch
	Batch   int    // how many ids the failed call loaded (1 unless a batch loader failed)
	Timeout bool   // the loader ran past LoaderTimeout
	Err     error
}

func (e *LoadError) Error() string {
	what := "loader"
	if e.Batch > 1 {
		what = fmt.Sprintf("batch loader (%d ids from %q)", e.Batch, e.ID)
	} else {
		what = fmt.Sprintf("loader for %q", e.ID)
	}
	if e.Timeout {
		return fmt.Sprintf("cache: table %s: %s timed out: %v", e.Table, what, e.Err)
	}
	return fmt.Sprintf("cache: table %s: %s: %v", e.Table, what, e.Err)
}

func (e *LoadError) Unwrap() error { return e.Err }

// Is reports a timeout as [ErrLoaderTimeout].
func (e *LoadError) Is(target error) bool { return target == ErrLoaderTimeout && e.Timeout }

// PanicError is a panic in a loader (or in a fill: a codec, a bug) turned into an error,
// with the stack of the panicking goroutine, as x/sync/singleflight does: one bad id must not
// take the process down, and every caller waiting on the fill learns what happened. Where
// names the step and the table; Unwrap returns the panic value when it is an error.
type PanicError = panics.Error
