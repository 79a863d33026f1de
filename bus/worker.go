package bus

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/echocache/echocache/keys"
)

// Worker drains one queue: it claims tasks in batches sized to its free slots (and its
// prefetch buffer), runs their kinds' handlers with bounded concurrency, renews every lease it
// holds with one batched extend per heartbeat, and sends each outcome (complete, retry with
// backoff, dead, snooze) in the round trip of the next claim, completes and claim in one
// script call. Up to two round trips are in flight at once: the next goes out while the
// previous is answered, and replies are applied in the order their round trips were sent.
// A job cancelled while it is held ([Bus.Cancel]) has its handler's context cancelled at the
// next heartbeat (cause [ErrCancelled]), or never starts when it still waits in the prefetch
// buffer, and goes to dead, unless its handler returned nil (then it is retired); a handler
// that returned a Snooze or RateLimited before a heartbeat told sends it to dead too, a round
// trip later (the server refuses to snooze a cancelled job). Idle, it blocks on the queue's wake list and wakes at the earliest
// scheduled run-at, one that another process's enqueue moved earlier included (the "s"
// marker); it never polls on a fixed sleep. It reaps and promotes its queue on a timer. See
// the package doc for a complete flow.
type Worker struct {
	b   *Bus
	q   keys.Queue
	cfg WorkerConfig
	log *slog.Logger

	mu       sync.Mutex
	handlers map[string]*handler
	started  bool
	closed   bool

	// Set by Start.
	wake        chan string   // the blocker's answers: the marker popped (wakeWork after an error), "" for a timeout
	blockReq    chan struct{} // the loop asks the blocker to block once
	given       chan string   // markers the loop gives back to the wake list (giveBack)
	stop        chan struct{} // closed by Close: stop claiming, drain
	hard        chan struct{} // closed when Close's deadline passed: cancel the handlers
	done        chan struct{} // closed when every goroutine of the worker has ended
	stopOnce    sync.Once
	hardOnce    sync.Once
	blockCtx    context.Context // cancelled when the worker drains: aborts a blocked BLPOP
	hardCtx     context.Context // cancelled handBackTimeout after hard: cuts a round trip short
	hardCancel  context.CancelFunc
	hardAt      atomic.Int64 // when hardCtx is cancelled (unix ns), once Close's deadline passed; 0 before
	blockStop   context.CancelFunc
	beatEvery   time.Duration // the heartbeat's interval
	tripTimeout time.Duration // bounds one round trip of the loop (tripBound)
	reporter    *reporter     // lists the queue, publishes the stats (worker_report.go)

	// Precomputed KEYS of the scripts the loop runs (completeclaim's are claim's).
	kClaim, kCompleteMany, kFail, kSnooze, kExtend, kReap, kPromote, kDue []string

	prefetch     int  // cfg.Prefetch when fixed; none when negative
	autoPrefetch bool // cfg.Prefetch is 0: the loop sizes the buffer (worker_prefetch.go)

	busy  atomic.Int64 // handlers running, for Stats
	stats struct {
		claimed, completed, failed, retried, dead, snoozed, handedBack, stale, leaseLost, cancelled, rateLimited atomic.Int64
		roundTrips, roundTripNanos                                                                               atomic.Int64
		prefetch                                                                                                 atomic.Int64 // the automatic buffer's size, as the loop last sized it
	}
}

// handlerFunc runs one task whose envelope was split: body is the encoded args.
type handlerFunc func(ctx context.Context, j Job, body []byte) error

// handler is one registered kind.
type handler struct {
	kind        string
	fn          handlerFunc
	codec       Codec
	maxAttempts int
	backoff     func(int64) time.Duration
	lease       time.Duration
	timeout     time.Duration // 0: none
	resultTTL   time.Duration // 0: keeps no results
}

// NewWorker returns a worker of cfg.Queue over b. Register handlers ([Handle], [HandleRaw]),
// then [Worker.Start]; [Worker.Close] stops it.
func NewWorker(b *Bus, cfg WorkerConfig) (*Worker, error) {
	if b == nil {
		return nil, fmt.Errorf("%w: bus.NewWorker: nil bus", ErrInvalid)
	}
	q, err := b.queue("worker", cfg.Queue)
	if err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults(b.cfg.Lease)
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	w := &Worker{
		b: b, q: q, cfg: cfg, handlers: map[string]*handler{},
		log:           cfg.Logger.With("queue", q.Name()),
		kClaim:        keysOf(scClaim, q),
		kCompleteMany: keysOf(scCompleteMany, q),
		kFail:         keysOf(scFail, q),
		kSnooze:       keysOf(scSnooze, q),
		kExtend:       keysOf(scExtend, q),
		kReap:         keysOf(scReap, q),
		kPromote:      keysOf(scPromote, q),
		kDue:          keysOf(scDue, q),
		prefetch:      max(cfg.Prefetch, 0),
		autoPrefetch:  cfg.Prefetch == 0,
	}
	return w, nil
}

// register adds a kind; build makes its function once the options are settled.
func (w *Worker) register(kind string, opts *HandlerOpts, build func(*handler) handlerFunc) error {
	if err := keys.ValidateName(kind); err != nil {
		return invalid("handler kind", err)
	}
	var o HandlerOpts
	if opts != nil {
		o = *opts
	}
	o = o.withDefaults(w.cfg)
	if err := o.validate(kind, w.cfg); err != nil {
		return err
	}
	h := &handler{kind: kind, codec: o.Codec, maxAttempts: o.MaxAttempts, backoff: o.Backoff, lease: o.Lease, timeout: max(o.Timeout, 0), resultTTL: o.ResultTTL}
	h.fn = w.wrap(kind, build(h), o.Middleware)
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.closed:
		return fmt.Errorf("bus: handler of kind %s: %w", kind, ErrWorkerClosed)
	case w.started:
		return fmt.Errorf("%w: handler of kind %s: register every kind before Start", ErrInvalid, kind)
	case w.handlers[kind] != nil:
		return fmt.Errorf("%w: handler of kind %s: the kind is registered already", ErrInvalid, kind)
	}
	w.handlers[kind] = h
	return nil
}

// Start starts the worker's goroutines: the loop (claims, outcomes, heartbeats,
// housekeeping), the blocker (the wake list's BLPOP, on a connection of its own, so
// blocking never stalls the client's shared pipeline) and the reporter (it lists the queue
// in the registry, [Bus.Queues], and publishes the worker's stats every StatsInterval). It
// returns at once.
func (w *Worker) Start() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.closed:
		return fmt.Errorf("bus: worker of queue %s: %w", w.q.Name(), ErrWorkerClosed)
	case w.started:
		return fmt.Errorf("%w: worker of queue %s: started already", ErrInvalid, w.q.Name())
	case len(w.handlers) == 0:
		return fmt.Errorf("%w: worker of queue %s: no handler registered", ErrInvalid, w.q.Name())
	}
	w.started = true
	w.beatEvery = w.heartbeatInterval()
	w.tripTimeout = w.tripBound()
	w.wake = make(chan string, 1)
	w.blockReq = make(chan struct{}, 1)
	w.given = make(chan string, 1)
	w.stop = make(chan struct{})
	w.hard = make(chan struct{})
	w.done = make(chan struct{})
	w.blockCtx, w.blockStop = context.WithCancel(context.Background())
	w.hardCtx, w.hardCancel = context.WithCancel(context.Background())
	var blockerDone sync.WaitGroup
	blockerDone.Go(w.blocker)
	w.reporter = w.startReporter()
	go func() {
		newLoop(w).run() // returns once its senders and its handler pool have ended
		w.blockStop()
		blockerDone.Wait()
		w.reporter.stop()
		w.hardCancel()
		close(w.done)
	}()
	return nil
}

// heartbeatInterval is HeartbeatInterval, or its default once the kinds are known: a third
// of the shortest lease of the worker and its kinds; at least minBeat.
func (w *Worker) heartbeatInterval() time.Duration {
	if w.cfg.HeartbeatInterval > 0 {
		return max(w.cfg.HeartbeatInterval, minBeat)
	}
	return max(w.shortestLease()/3, minBeat)
}

// tripBound is how long one round trip of the loop may take: half the shortest lease, from
// minTripTimeout to maxTripTimeout. Replies are applied in the order their round trips were
// sent, so one sent to a node that stopped answering (paused, cut off, failed over) holds
// back the replies of the next, and with them the jobs those claimed, whose leases run
// meanwhile; past half a lease its own extends come too late to matter anyway.
func (w *Worker) tripBound() time.Duration {
	return min(max(w.shortestLease()/2, minTripTimeout), maxTripTimeout)
}

// shortestLease is the shortest lease of the worker and its kinds.
func (w *Worker) shortestLease() time.Duration {
	shortest := w.cfg.Lease
	for _, h := range w.handlers {
		shortest = min(shortest, h.lease)
	}
	return shortest
}

// Close stops the worker: it stops claiming, lets running handlers finish and sends their
// outcomes, renewing their leases meanwhile. When ctx ends first, it cancels the handlers'
// contexts (cause [ErrWorkerClosed]), waits for them to return, completes the jobs whose
// handler returned nil and hands the others back to pending without counting a failure;
// jobs that a claim in flight brings back are handed back too. A job whose hand-back cannot
// be sent is left to its lease's expiry. What is in flight or sent after ctx ended is bounded
// by 2 s from then, all of it together, so a server that stopped answering holds Close up by
// about that past ctx's end. Close returns when every goroutine of the worker has ended (so a
// handler that ignores its context holds it), with nil, or with ctx's error when ctx ended
// before the worker was done (whatever still ran then, handlers or a round trip, was cut
// short as above). Closing a worker that was never started, or closing twice, is allowed.
func (w *Worker) Close(ctx context.Context) error {
	w.mu.Lock()
	started := w.started
	w.closed = true
	w.mu.Unlock()
	if !started {
		return nil
	}
	w.stopOnce.Do(func() { close(w.stop) })
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
	}
	var cut *time.Timer
	w.hardOnce.Do(func() {
		// A round trip in flight keeps the hand-backs' bound, not less: answered, its claims are
		// handed back and its completes counted instead of left to their leases.
		w.hardAt.Store(time.Now().Add(handBackTimeout).UnixNano())
		cut = time.AfterFunc(handBackTimeout, w.hardCancel)
		close(w.hard)
	})
	<-w.done
	if cut != nil {
		cut.Stop()
	}
	return fmt.Errorf("bus: closing the worker of queue %s: not done when the context ended, what ran was cut short: %w", w.q.Name(), ctx.Err())
}

// Handles reports whether a handler is registered for kind; pass it as
// [SchedulerConfig.Handles] so a schedule whose kind this worker cannot run is reported
// where it fires.
func (w *Worker) Handles(kind string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.handlers[kind] != nil
}

// ID is the worker's id in the stats it publishes (WorkerConfig.ID, or its default).
func (w *Worker) ID() string { return w.cfg.ID }

// Stats returns the worker's counters.
func (w *Worker) Stats() WorkerStats {
	s := &w.stats
	st := WorkerStats{
		Queue:     w.q.Name(),
		Running:   int(w.busy.Load()),
		Claimed:   s.claimed.Load(),
		Completed: s.completed.Load(), Failed: s.failed.Load(), Retried: s.retried.Load(), Dead: s.dead.Load(),
		Snoozed: s.snoozed.Load(), HandedBack: s.handedBack.Load(), Stale: s.stale.Load(), LeaseLost: s.leaseLost.Load(),
		Cancelled: s.cancelled.Load(), RateLimited: s.rateLimited.Load(),
		RoundTrips: s.roundTrips.Load(), RoundTripTime: time.Duration(s.roundTripNanos.Load()),
		Prefetch: w.prefetch,
	}
	if w.autoPrefetch {
		st.Prefetch = int(s.prefetch.Load())
	}
	return st
}
