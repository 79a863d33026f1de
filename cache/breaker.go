package cache

import (
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/valkey-io/valkey-go"
)

// ErrL2Unavailable is wrapped (with ErrL2) by a read that did not try L2 because the cache's
// circuit breaker is open: Valkey failed BreakerFailures times in a row and has not answered
// a probe since. A table in degraded mode answers such reads from its loader instead.
var ErrL2Unavailable = errors.New("cache: L2 unavailable (circuit open)")

// breaker is a Cache's circuit breaker over its Valkey client: after failures consecutive
// L2 failures it opens, and reads skip L2 (instead of each paying the L2 timeout) until a
// probe, the reconcile's read of the coherence records every probe interval, succeeds and
// closes it. It is per Cache because a Cache has one client; on a cluster, one node down
// opens it for every table of the cache, which errs on the side of the loader.
type breaker struct {
	failures int
	probe    time.Duration
	log      *slog.Logger
	onOpen   func(error) // marks every table degraded and wakes the reconcile loop, which probes while the breaker is open

	n     atomic.Int64 // consecutive failures
	open  atomic.Bool
	since atomic.Int64 // unix ns the breaker opened; 0 when closed
	opens atomic.Int64
}

// allow reports whether reads may try L2.
func (b *breaker) allow() bool { return !b.open.Load() }

// observe counts the outcome of one L2 operation, as l2outcome classified it: a success
// resets the count, an L2 failure adds to it, a caller's own cancellation counts for nothing.
func (b *breaker) observe(err error) {
	switch {
	case err == nil:
		if b.n.Load() != 0 { // a store on every success would bounce the line between cores
			b.n.Store(0)
		}
	case counts(err):
		if b.n.Add(1) >= int64(b.failures) && b.open.CompareAndSwap(false, true) {
			b.since.Store(time.Now().UnixNano())
			b.opens.Add(1)
			b.log.Warn("cache: Valkey failing; circuit open: reads skip L2 until a probe succeeds",
				"failures", b.n.Load(), "probe_every", b.probe, "err", err)
			b.onOpen(err)
		}
	}
}

// counts reports whether err, an L2 outcome, is a failure the breaker counts: Valkey could not
// serve (not an error reply, not a caller's cancellation).
func counts(err error) bool { return errors.Is(err, ErrL2) && unreachable(err) }

// close closes the breaker after a successful probe.
func (b *breaker) close() {
	b.n.Store(0)
	if b.open.CompareAndSwap(true, false) {
		open := time.Duration(time.Now().UnixNano() - b.since.Swap(0))
		b.log.Info("cache: Valkey answers again; circuit closed", "open_for", open)
	}
}

// unreachable tells an error that says Valkey cannot serve (no connection, a timeout, a
// server loading its data or a cluster without quorum) from an error reply to one command
// (a script's refusal), which says the server is there.
func unreachable(err error) bool {
	var ve *valkey.ValkeyError
	if !errors.As(err, &ve) {
		return true
	}
	return ve.IsLoading() || ve.IsClusterDown() || ve.IsTryAgain()
}
