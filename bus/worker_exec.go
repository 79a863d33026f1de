package bus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/echocache/echocache/internal/panics"
)

// The executor: the loop hands claimed jobs to it in batches; a pool of at most Concurrency
// goroutines takes them in claim order and runs their handlers, each goroutine going on to the
// next waiting job by itself; what a handler returned (or the panic it raised) is queued for the
// loop, which is woken once per batch of returns, not once per job. A job waits in the executor
// while every pool goroutine is busy: that is the prefetch buffer (WorkerConfig.Prefetch).

// inflight is one held job: claimed, waiting for a pool goroutine, its handler running, or its
// outcome not yet accepted.
type inflight struct {
	job   Job
	idStr string // job.ID as the server spelled it: the outcome's ARGV, without encoding it again
	kind  string
	h     *handler // nil when the payload names no registered kind
	body  []byte
	lease time.Duration

	// Set under the executor's lock when the handler starts (a pool goroutine), read by the
	// loop under the same lock while the handler runs and freely once it returned.
	ctx      context.Context
	cancel   context.CancelCauseFunc
	since    time.Time      // when the handler started
	claimed  time.Time      // when the loop took the job from its claim (loop state)
	parent   deadlineParent // ctx's parent when the kind has a timeout: it carries the deadline
	started  bool           // a pool goroutine took the job
	dropped  bool           // taken back by the loop before a pool goroutine took it
	expired  bool           // the handler ran past its timeout: its lease is no longer renewed
	heapSlot int            // its index in the executor's deadline heap; -1 when not in it
	result   *resultSlot    // where SetResult puts the result; nil unless the kind keeps results

	// Set by the handler's goroutine before the loop takes the return.
	err error
	dur time.Duration

	// Loop state.
	preErr    error // no envelope or no handler: the handler never ran
	handBack  bool  // the handler never ran and the job goes back to pending (ClaimAck, Close)
	returned  bool  // the loop took the handler's return (or nothing is to run)
	lost      bool  // a heartbeat found the lease lost
	cancelled bool  // a heartbeat found the job cancelled: its handler is stopped (or never runs), a failure goes to dead
}

// timedOut reports whether the handler ran past its timeout: its lease is no longer renewed.
// The loop calls it under the executor's lock or once the handler returned.
func (r *inflight) timedOut(now time.Time) bool {
	return r.expired || r.started && r.h != nil && r.h.timeout > 0 && now.Sub(r.since) >= r.h.timeout
}

// executor runs handlers for one worker. Its lock guards ready, done and the fields of the
// inflights marked so above.
type executor struct {
	w      *Worker
	mu     sync.Mutex
	wakeup sync.Cond     // a job is ready or the executor closes
	ready  []*inflight   // jobs waiting for a pool goroutine, in claim order
	head   int           // ready[head:] are waiting
	done   []*inflight   // returns the loop has not taken
	notify chan struct{} // capacity 1: done went from empty to not empty
	idle   int           // pool goroutines waiting on wakeup
	size   int           // pool goroutines started
	closed bool
	pool   sync.WaitGroup
	dl     deadlines // handlers with a timeout, earliest deadline first
}

func newExecutor(w *Worker) *executor {
	ex := &executor{w: w, notify: make(chan struct{}, 1)}
	ex.wakeup.L = &ex.mu
	ex.dl.init(ex)
	return ex
}

// submit queues jobs for the pool, starting goroutines while fewer than Concurrency run and
// no idle one is left to take a job.
func (ex *executor) submit(rs []*inflight) {
	if len(rs) == 0 {
		return
	}
	ex.mu.Lock()
	ex.ready = append(ex.ready, rs...)
	waiting := len(ex.ready) - ex.head
	for n := min(ex.w.cfg.Concurrency-ex.size, waiting-ex.idle); n > 0; n-- {
		// Pool goroutines live as long as the worker: a new goroutine per job would grow its
		// stack again for every job (a decode alone does), which costs more than the job.
		ex.size++
		ex.pool.Go(ex.serve)
	}
	for range min(waiting, ex.idle) {
		ex.wakeup.Signal()
	}
	ex.mu.Unlock()
}

// serve is one pool goroutine: it takes waiting jobs in order until the executor closes and
// nothing waits.
func (ex *executor) serve() {
	ex.mu.Lock()
	for {
		for ex.head == len(ex.ready) && !ex.closed {
			ex.idle++
			ex.wakeup.Wait()
			ex.idle--
		}
		if ex.head == len(ex.ready) {
			ex.mu.Unlock()
			return
		}
		r := ex.ready[ex.head]
		ex.ready[ex.head] = nil
		ex.head++
		if ex.head == len(ex.ready) {
			ex.ready, ex.head = ex.ready[:0], 0
		}
		if r.dropped {
			continue
		}
		ex.startLocked(r)
		ex.mu.Unlock()
		if !ex.run(r) {
			return // the handler ended this goroutine (runtime.Goexit); another took its place
		}
		ex.mu.Lock()
		ex.finishedLocked(r)
	}
}

// run runs r's handler on a pool goroutine; false when the handler ended the goroutine with
// runtime.Goexit (as t.FailNow does). The job is then reported all the same and a new pool
// goroutine takes this one's place: else the loop would wait for the job forever (Close
// included) and the pool would have lost a slot.
func (ex *executor) run(r *inflight) (returned bool) {
	defer func() {
		if !returned {
			ex.mu.Lock()
			ex.finishedLocked(r)
			ex.pool.Go(ex.serve) // this goroutine still counts in pool: Add may come before its Done
			ex.mu.Unlock()
		}
	}()
	ex.w.runHandler(r)
	return true
}

// finishedLocked queues r's return for the loop, waking it when the queue was empty.
func (ex *executor) finishedLocked(r *inflight) {
	ex.dl.remove(r)
	ex.done = append(ex.done, r)
	if len(ex.done) == 1 {
		select {
		case ex.notify <- struct{}{}:
		default:
		}
	}
}

// startLocked gives r its context: a root of its own, cancelled by the loop (lease lost,
// cancelled, Close's deadline) or by the deadline heap (timeout), carrying the result slot
// when the kind keeps results. A timeout is a deadline the context reports, not a timer of
// its own: one timer serves every handler of the worker.
func (ex *executor) startLocked(r *inflight) {
	r.started = true
	r.since = time.Now()
	var parent context.Context = context.Background()
	if r.h.timeout > 0 {
		r.parent = deadlineParent{at: r.since.Add(r.h.timeout)}
		parent = &r.parent
	}
	r.ctx, r.cancel = context.WithCancelCause(parent)
	r.withResult()
	if r.h.timeout > 0 {
		ex.dl.add(r)
	}
	ex.w.busy.Add(1)
}

// take returns the handlers' returns the loop has not taken yet.
func (ex *executor) take(into []*inflight) []*inflight {
	ex.mu.Lock()
	into = append(into, ex.done...)
	clear(ex.done)
	ex.done = ex.done[:0]
	ex.mu.Unlock()
	return into
}

// drop takes r back from the jobs waiting for a pool goroutine; false when one took it
// already (its handler runs or ran).
func (ex *executor) drop(r *inflight) bool {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if r.started {
		return false
	}
	r.dropped = true
	return true
}

// cancelRunning cancels the context of r's handler with cause when it started; it reports
// whether it had.
func (ex *executor) cancelRunning(r *inflight, cause error) bool {
	ex.mu.Lock()
	cancel := r.cancel
	ex.mu.Unlock()
	if cancel == nil {
		return false
	}
	cancel(cause)
	return true
}

// close ends the pool once nothing waits and every handler returned, and waits for it.
func (ex *executor) close() {
	ex.mu.Lock()
	ex.closed = true
	ex.wakeup.Broadcast()
	ex.mu.Unlock()
	ex.pool.Wait()
	ex.dl.stop()
}

// route reads the kind at the head of a claimed job's payload and finds its handler; preErr
// says why there is nothing to run.
func (w *Worker) route(j Job, idStr string) *inflight {
	r := &inflight{job: j, idStr: idStr, lease: w.cfg.Lease, heapSlot: -1}
	start, n := envelopeKind(j.Payload) // past a header block, if any
	if n == 0 {
		r.preErr = fmt.Errorf("%w: job %s", ErrNoEnvelope, j.ID)
		return r
	}
	kind := j.Payload[start : start+n]
	r.h = w.handlers[string(kind)]
	if r.h == nil {
		r.kind = string(kind)
		r.preErr = fmt.Errorf("%w: kind %s, job %s", ErrUnknownKind, r.kind, j.ID)
		return r
	}
	r.kind, r.lease, r.body = r.h.kind, r.h.lease, j.Payload[start+n+1:]
	return r
}

// runHandler calls the handler; a panic becomes the job's error, a *[PanicError], and so
// does an error whose methods panic (a typed nil pointer, say), since the loop reads the
// error's text and chain; a runtime.Goexit fails the job too. It runs on a pool goroutine, so
// it touches r only, never the loop.
func (w *Worker) runHandler(r *inflight) {
	returned := false
	defer func() {
		where := "bus: handler of kind " + r.kind
		if p := recover(); p != nil {
			r.err = panics.New(where, p)
		} else if !returned {
			r.err = fmt.Errorf("%s called runtime.Goexit", where)
		}
		r.err = readableError(where, r.err)
		r.dur = time.Since(r.since)
		r.cancel(nil) // release the context; a handler's own goroutines see it done
		w.busy.Add(-1)
	}()
	r.err = r.h.fn(r.ctx, r.job, r.body)
	returned = true
}

// readableError is err, or a *PanicError when reading err panics: its text and the chain the
// loop looks through (errors.Is and errors.As) are read here, on the handler's goroutine,
// where a panic fails the one job instead of ending the loop.
func readableError(where string, err error) (out error) {
	if err == nil {
		return nil
	}
	defer func() {
		if p := recover(); p != nil {
			out = panics.New(where, fmt.Sprintf("the error it returned (%T) panicked: %v", err, p))
		}
	}()
	_ = err.Error()
	var target *unmatchedError
	_ = errors.Is(err, errUnmatched) // each walks the whole chain
	_ = errors.As(err, &target)
	return err
}

// errUnmatched and unmatchedError match no error: looking for them walks an error's whole
// chain (Unwrap, Is and As methods).
var errUnmatched = errors.New("bus: matches no error")

type unmatchedError struct{}

func (*unmatchedError) Error() string { return "bus: matches no error" }

// handBack takes a claimed job whose handler must not start (its claim fell short of
// ClaimAck, or Close's deadline passed while it waited): it is held until its hand-back,
// which goes out with the next round trip.
func (l *loop) handBack(r *inflight) {
	r.returned, r.handBack = true, true
	l.held[r] = struct{}{}
	l.outcomes = append(l.outcomes, r)
}

// start takes claimed jobs: each is held from now on and handed to the executor. A job with
// nothing to run (no envelope, an unknown kind) has its outcome queued at once; past Close's
// deadline a job is handed back instead of started.
func (l *loop) start(rs []*inflight) {
	w := l.w
	run := rs[:0:0]
	now := time.Now()
	for _, r := range rs {
		r.claimed = now
		w.stats.claimed.Add(1)
		l.held[r] = struct{}{}
		w.emit(JobEvent{Type: JobClaimed, Job: r.job, Kind: r.kind})
		if r.preErr != nil {
			// Nothing to run: the outcome (dead, or a retry for an unknown kind) goes out with
			// the next round trip.
			r.returned = true
			l.outcomes = append(l.outcomes, r)
			if errors.Is(r.preErr, ErrUnknownKind) {
				r.err, r.preErr = r.preErr, nil
			}
			continue
		}
		if l.pastDeadline {
			// Claimed by a round trip whose reply came after Close's deadline: the handlers
			// were cancelled already, so this one must not start with a context nothing cancels.
			l.handBack(r)
			continue
		}
		run = append(run, r)
	}
	l.busy += len(run)
	if len(run) > 0 {
		l.newHandlers = true
		l.ex.submit(run)
	}
}
