package bus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/echocache/echocache/internal/panics"
)

// The executor: a claimed job becomes an inflight, its handler runs on a goroutine of the
// worker's pool, and what it returned (or the panic it raised) goes back to the loop on
// Worker.returns.

// inflight is one held job: claimed, its handler running or its outcome not yet accepted.
type inflight struct {
	job         Job
	kind        string
	h           *handler // nil when the payload names no registered kind
	body        []byte
	ctx         context.Context
	cancel      context.CancelCauseFunc
	stopTimeout context.CancelFunc // the timeout's; nil without one
	since       time.Time          // when the handler started
	lease       time.Duration
	result      *resultSlot // where SetResult puts the result; nil unless the kind keeps results

	// Set by the handler's goroutine before it sends the inflight on returns.
	err error
	dur time.Duration

	// Loop state.
	preErr    error // no envelope or no handler: the handler never ran
	handBack  bool  // claimed short of ClaimAck: the handler never ran, the job goes back to pending
	returned  bool  // the handler returned
	lost      bool  // a heartbeat found the lease lost
	cancelled bool  // a heartbeat found the job cancelled: its handler is stopped, a failure goes to dead
}

// timedOut reports whether the handler ran past its timeout: its lease is no longer renewed.
func (r *inflight) timedOut(now time.Time) bool {
	return r.h != nil && r.h.timeout > 0 && now.Sub(r.since) >= r.h.timeout
}

// handBack takes a claimed job whose handler must not start (its claim fell short of
// ClaimAck): it is held until its hand-back, which goes out with the next round trip.
func (l *loop) handBack(j Job) {
	r := l.w.route(j)
	r.ctx, r.cancel = context.WithCancelCause(context.Background())
	r.returned, r.handBack = true, true
	l.held[r] = struct{}{}
	l.outcomes = append(l.outcomes, r)
}

// start takes a claimed job: it is held from now on and its handler is handed to the pool.
// A job with nothing to run (no envelope, an unknown kind) has its outcome queued at once.
func (l *loop) start(j Job) {
	w := l.w
	w.stats.claimed.Add(1)
	r := w.route(j)
	l.held[r] = struct{}{}
	w.emit(JobEvent{Type: JobClaimed, Job: j, Kind: r.kind})
	if r.preErr != nil {
		// Nothing to run: the outcome (dead, or a retry for an unknown kind) goes out with the
		// next round trip.
		r.ctx, r.cancel = context.WithCancelCause(context.Background())
		r.returned = true
		l.outcomes = append(l.outcomes, r)
		if errors.Is(r.preErr, ErrUnknownKind) {
			r.err, r.preErr = r.preErr, nil
		}
		return
	}
	// Each handler's context is a root: the loop cancels every one itself (lease lost,
	// Close's deadline), and a root spares registering each job with a shared parent.
	r.ctx, r.cancel = context.WithCancelCause(context.Background())
	if r.h.timeout > 0 {
		r.ctx, r.stopTimeout = context.WithTimeoutCause(r.ctx, r.h.timeout, ErrJobTimeout)
	}
	r.withResult()
	l.busy++
	w.busy.Add(1)
	l.newHandlers = true
	if l.poolSize < l.busy {
		// Handler goroutines live as long as the worker: a new goroutine per job would grow
		// its stack again for every job (a decode alone does), which costs more than the job.
		l.poolSize++
		w.pool.Go(w.serve)
	}
	w.work <- r // capacity Concurrency, and at most Concurrency jobs run: never blocks
}

// route reads the kind at the head of a claimed job's payload and finds its handler; preErr
// says why there is nothing to run.
func (w *Worker) route(j Job) *inflight {
	r := &inflight{job: j, since: time.Now(), lease: w.cfg.Lease}
	n := envelopeKindLen(j.Payload)
	if n == 0 {
		r.preErr = fmt.Errorf("%w: job %s", ErrNoEnvelope, j.ID)
		return r
	}
	r.h = w.handlers[string(j.Payload[:n])]
	if r.h == nil {
		r.kind = string(j.Payload[:n])
		r.preErr = fmt.Errorf("%w: kind %s, job %s", ErrUnknownKind, r.kind, j.ID)
		return r
	}
	r.kind, r.lease, r.body = r.h.kind, r.h.lease, j.Payload[n+1:]
	return r
}

// serve is one goroutine of the handler pool: it runs the jobs the loop hands it until the
// loop ends and closes Worker.work.
func (w *Worker) serve() {
	for r := range w.work {
		w.runHandler(r)
	}
}

// runHandler calls the handler and sends r back to the loop; a panic becomes the job's
// error, a *[PanicError]. It runs on a pool goroutine, so it touches r only, never the loop.
func (w *Worker) runHandler(r *inflight) {
	defer func() {
		if p := recover(); p != nil {
			r.err = panics.New("bus: handler of kind "+r.kind, p)
		}
		r.dur = time.Since(r.since)
		w.returns <- r
	}()
	r.err = r.h.fn(r.ctx, r.job, r.body)
}
