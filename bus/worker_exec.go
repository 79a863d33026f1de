package bus

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"
)

// running is one held job: claimed, its handler running or its outcome not yet accepted.
type running struct {
	job     Job
	kind    string
	h       *handler // nil when the payload names no registered kind
	body    []byte
	ctx     context.Context
	cancel  context.CancelCauseFunc
	stopT   context.CancelFunc // the timeout's; nil without one
	started time.Time
	lease   time.Duration

	// Set by the handler's goroutine before it sends r on results.
	err error
	dur time.Duration

	// Loop state.
	preErr   error // no envelope or no handler: the handler never ran
	finished bool  // the handler returned
	lost     bool  // a heartbeat found the lease lost
}

// timedOut reports whether the handler ran past its timeout: its lease is no longer renewed.
func (r *running) timedOut(now time.Time) bool {
	return r.h != nil && r.h.timeout > 0 && now.Sub(r.started) >= r.h.timeout
}

// start runs the handler of a claimed job on a goroutine of its own.
func (w *Worker) start(st *loopState, j Job) {
	w.stats.claimed.Add(1)
	r := &running{job: j, started: time.Now(), lease: w.cfg.Lease}
	n := envelopeKindLen(j.Payload)
	if n == 0 {
		r.preErr = fmt.Errorf("%w: job %s", ErrNoEnvelope, j.ID)
	} else {
		r.h = w.handlers[string(j.Payload[:n])]
		if r.h == nil {
			r.kind = string(j.Payload[:n])
			r.preErr = fmt.Errorf("%w: kind %s, job %s", ErrUnknownKind, r.kind, j.ID)
		} else {
			r.kind, r.lease, r.body = r.h.kind, r.h.lease, j.Payload[n+1:]
		}
	}
	st.held[r] = struct{}{}
	w.emit(JobEvent{Type: JobClaimed, Job: j, Kind: r.kind})
	if r.preErr != nil {
		// Nothing to run: the outcome (dead, or a retry for an unknown kind) goes out with the
		// next round trip.
		r.ctx, r.cancel = context.WithCancelCause(context.Background())
		r.finished = true
		st.outcomes = append(st.outcomes, r)
		if errors.Is(r.preErr, ErrUnknownKind) {
			r.err, r.preErr = r.preErr, nil
		}
		return
	}
	// Each handler's context is a root: the loop cancels every one itself (lease lost,
	// Close's deadline), and a root spares registering each job with a shared parent.
	r.ctx, r.cancel = context.WithCancelCause(context.Background())
	if r.h.timeout > 0 {
		r.ctx, r.stopT = context.WithTimeoutCause(r.ctx, r.h.timeout, ErrJobTimeout)
	}
	st.running++
	w.running.Add(1)
	st.started = true
	if st.pool < st.running {
		// Handler goroutines live as long as the worker: a new goroutine per job would grow
		// its stack again for every job (a decode alone does), which costs more than the job.
		st.pool++
		w.pool.Go(func() {
			for r := range w.work {
				w.run(r)
			}
		})
	}
	w.work <- r // capacity Concurrency, and at most Concurrency jobs run: never blocks
}

// run calls the handler; a panic becomes the job's error.
func (w *Worker) run(r *running) {
	defer func() {
		if p := recover(); p != nil {
			r.err = fmt.Errorf("bus: handler of kind %s panicked: %v\n%s", r.kind, p, debug.Stack())
		}
		r.dur = time.Since(r.started)
		w.results <- r
	}()
	r.err = r.h.fn(r.ctx, r.job, r.body)
}
