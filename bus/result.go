package bus

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Results are opt-in: a job retired by a complete that asks for it keeps a small result
// beside nothing else, emq:{<q>}:result:<JOB id>, for a TTL; [Bus.Lookup] reads it as a job
// in [StateRetired]. Without the option, completion retires the row and nothing remains.

// MaxResultSize is the largest result a job keeps, in bytes.
const MaxResultSize = 64 << 10

// resultArgs validates a result and its TTL for op on j.
func resultArgs(op string, j Job, result []byte, ttl time.Duration) error {
	switch {
	case ttl < 0:
		return fmt.Errorf("%w: %s %s in queue %s: negative ResultTTL", ErrInvalid, op, j.ID, j.Queue)
	case ttl == 0 && result != nil:
		return fmt.Errorf("%w: %s %s in queue %s: a Result needs a ResultTTL", ErrInvalid, op, j.ID, j.Queue)
	case len(result) > MaxResultSize:
		return fmt.Errorf("%w: %s %s in queue %s: a result of %d bytes; at most %d are kept", ErrTooLarge, op, j.ID, j.Queue, len(result), MaxResultSize)
	}
	return nil
}

// resultSlot is where a handler's [SetResult] puts its result; the loop takes it once the
// handler returned, and a later SetResult is refused.
type resultSlot struct {
	mu     sync.Mutex
	b      []byte
	set    bool
	closed bool
}

type resultKey struct{}

// SetResult sets the result of the job whose handler runs with ctx: when the handler then
// returns nil, the job is retired keeping result (copied) for its kind's
// [HandlerOpts].ResultTTL, readable by [Bus.Lookup]; a handler that fails keeps none. A later
// call replaces the result. It answers an error wrapping [ErrInvalid] when ctx is not the
// context of a handler whose kind keeps results (ResultTTL unset), or when the handler
// already returned, and [ErrTooLarge] for more than [MaxResultSize] bytes.
func SetResult(ctx context.Context, result []byte) error {
	slot, _ := ctx.Value(resultKey{}).(*resultSlot)
	if slot == nil {
		return fmt.Errorf("%w: bus.SetResult: not the context of a handler whose kind keeps results (set HandlerOpts.ResultTTL)", ErrInvalid)
	}
	if len(result) > MaxResultSize {
		return fmt.Errorf("%w: bus.SetResult: a result of %d bytes; at most %d are kept", ErrTooLarge, len(result), MaxResultSize)
	}
	slot.mu.Lock()
	defer slot.mu.Unlock()
	if slot.closed {
		return fmt.Errorf("%w: bus.SetResult: the handler returned already", ErrInvalid)
	}
	slot.b, slot.set = append([]byte{}, result...), true
	return nil
}

// RecordResult returns a child of parent under which [SetResult] succeeds, and a function that
// reports the result set last (ok is false when none was): for running a handler outside a
// [Worker], as a test helper does. Calling result ends the recording: a later SetResult
// answers ErrInvalid, as it does once a worker's handler returned.
func RecordResult(parent context.Context) (ctx context.Context, result func() ([]byte, bool)) {
	slot := &resultSlot{}
	r := &inflight{result: slot}
	return context.WithValue(parent, resultKey{}, slot), r.takeResult
}

// withResult gives r's handler a result slot when its kind keeps results.
func (r *inflight) withResult() {
	if r.h != nil && r.h.resultTTL > 0 {
		r.result = &resultSlot{}
		r.ctx = context.WithValue(r.ctx, resultKey{}, r.result)
	}
}

// takeResult closes r's slot and returns the result its handler set, if any.
func (r *inflight) takeResult() ([]byte, bool) {
	if r.result == nil {
		return nil, false
	}
	r.result.mu.Lock()
	defer r.result.mu.Unlock()
	r.result.closed = true
	return r.result.b, r.result.set
}

// completeResultStep retires r's job keeping its handler's result: one complete of its own,
// since completemany keeps no results.
func (l *loop) completeResultStep(r *inflight, value []byte) step {
	w := l.w
	run := w.b.completeRunWith(w.q, r.job, value, r.h.resultTTL)
	c := call{"complete", w.q.Name(), r.job.ID, r.job.Token}
	return step{run, func(res result) bool {
		if transient(res.err) {
			w.log.Error("bus: worker: complete", "job", r.job.ID, "err", errorFor(c, res.err))
			l.resend = append(l.resend, r)
			return false
		}
		delete(l.held, r)
		if err := errorFor(c, res.err); err != nil {
			l.refused(r, err)
			return true
		}
		w.emit(JobEvent{Type: JobCompleted, Job: r.job, Kind: r.kind, Duration: r.dur})
		return true
	}}
}
