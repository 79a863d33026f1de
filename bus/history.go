package bus

import (
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// A job's failure history lives beside its row, never in it (the row is exactly state,
// attempts, payload): the list emq:{<q>}:errors:<JOB id>, one entry per failed attempt,
// written by the same scripts that fail a job (fail, and reap for a lease that ran out) and
// deleted by the same scripts that delete its row (complete, cancel, purge). Retrying a dead
// job keeps it, so a job that dies again shows every reason.

// Bounds of the failure history.
const (
	// MaxFailureText is the longest error text an entry keeps, in bytes. A longer text is cut
	// to at most this many bytes on a UTF-8 boundary (a rune is never split), with nothing
	// appended.
	MaxFailureText = 1024
	// MaxFailures is how many entries a job's history keeps: the last attempts, oldest first.
	MaxFailures = 10
)

// The texts the scripts record for failures that no handler reported.
const (
	// LeaseExpired is the error text reap records for an attempt whose lease ran out (a
	// worker that crashed, stalled or lost its connection).
	LeaseExpired = "lease expired"
)

// Failure is one failed attempt of a job, as [Bus.Lookup] reads it from the job's failure
// history.
type Failure struct {
	// Attempt is the attempts count of the attempt that failed: the token its claim minted.
	Attempt int64
	// At is when it failed, on the server's clock (ms resolution).
	At time.Time
	// Error is the error text: the handler's error, FailOpts.Error, or [LeaseExpired]; at
	// most [MaxFailureText] bytes.
	Error string
}

// failureText cuts s to at most MaxFailureText bytes without splitting a rune: the cut backs
// off to the start of the rune that would straddle the limit. Bytes that are no rune's (text
// that is not UTF-8) straddle nothing: the cut backs off at most to the last rune start
// within utf8.UTFMax bytes of the limit, and only when a whole rune starts there.
func failureText(s string) string {
	if len(s) <= MaxFailureText {
		return s
	}
	i := MaxFailureText
	for j := i; j >= 0 && j > i-utf8.UTFMax; j-- {
		if utf8.RuneStart(s[j]) {
			if r, size := utf8.DecodeRuneInString(s[j:]); j+size > i && (r != utf8.RuneError || size > 1) {
				return s[:j]
			}
			break
		}
	}
	return s[:i]
}

// parseFailure reads one history entry: "<attempt> <at_ms> <text>".
func parseFailure(entry string) (Failure, bool) {
	a, rest, ok1 := strings.Cut(entry, " ")
	at, text, ok2 := strings.Cut(rest, " ")
	attempt, err1 := strconv.ParseInt(a, 10, 64)
	ms, err2 := strconv.ParseInt(at, 10, 64)
	if !ok1 || !ok2 || err1 != nil || err2 != nil {
		return Failure{}, false
	}
	return Failure{Attempt: attempt, At: time.UnixMilli(ms), Error: text}, true
}

// parseFailures reads a history, oldest first.
func parseFailures(op string, entries []string) ([]Failure, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	out := make([]Failure, len(entries))
	for i, e := range entries {
		f, ok := parseFailure(e)
		if !ok {
			return nil, protocolError(op, "failure history entry %q", e)
		}
		out[i] = f
	}
	return out, nil
}
