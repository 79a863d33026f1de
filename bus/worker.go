package bus

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/echocache/echocache/keys"
)

// Defaults of [WorkerConfig].
const (
	// DefaultConcurrency is how many handlers a worker runs at once.
	DefaultConcurrency = 10
	// DefaultJobTimeout caps a handler's runtime.
	DefaultJobTimeout = time.Minute
	// DefaultWakeTimeout is the longest an idle worker blocks on the wake list before it
	// looks for work again by itself.
	DefaultWakeTimeout = 5 * time.Second
	// DefaultHousekeepInterval is how often a worker reaps expired leases and promotes due
	// scheduled jobs of its queue.
	DefaultHousekeepInterval = 2 * time.Second
	// MaxPrefetch bounds WorkerConfig.Prefetch.
	MaxPrefetch = maxClaim
	// maxConcurrency is the largest Concurrency the worker uses; a larger one counts as it.
	maxConcurrency = 1 << 30
	// maxScriptUint is the largest count a script takes (its uint rule: at most 15 digits).
	maxScriptUint = 999_999_999_999_999
)

// WorkerConfig configures a [Worker]. Queue is required; every zero field means its default.
type WorkerConfig struct {
	// Queue is the queue the worker drains. One worker drains one queue; run one worker per
	// queue (they may share a Bus).
	Queue string
	// Concurrency is how many handlers run at once. Claims never take more jobs than there
	// are free slots and the prefetch buffer (Prefetch) together. Default 10
	// ([DefaultConcurrency]); more than 1<<30 counts as 1<<30.
	Concurrency int
	// Prefetch is how many jobs beyond the free slots the worker claims ahead: they wait, leased,
	// in a buffer, and a handler that returns starts the next one at once instead of waiting for a
	// round trip. The cost: a buffered job is leased (and its attempts counted, and it counts
	// against its lane's cap) while it waits, so another worker cannot take it, and heartbeats
	// renew its lease like a running one's; a worker that crashes leaves its buffered jobs to
	// their leases: another worker runs them once a lease ran out and a reap put them back (none
	// is lost; their handlers had not started, so none runs twice), a lease later than if they had
	// waited in pending. Close runs the buffered jobs before it returns (unless a stall hands them
	// back first, below); past its deadline it hands those not started back to pending. At most
	// [MaxPrefetch]; negative: none, the worker still claims for the slots that free while earlier
	// round trips are in flight.
	//
	// Default 0: automatic. The buffer holds about as many jobs as the handlers finish while one
	// round trip is in flight: Concurrency × mean round trip time ÷ mean handler run time (moving
	// averages of the round trips answered and the handlers returned), at most Concurrency, and
	// none until a handler returned. So a buffered job waits about one round trip on average,
	// handlers of one pace assumed, and a worker buffers nothing once its handlers run longer than
	// Concurrency round trips. When handlers that were fast stall (no handler returned for a
	// heartbeat interval, and at least a second), the heartbeat hands the jobs buffered that long
	// back to pending, for another worker (or this one, once a slot frees), each claim counting as
	// an attempt as any hand-back's does, and the buffer shrinks. [WorkerStats].Prefetch reads the
	// size. Measured (make bench-profile, no-op jobs, concurrency 20, one run): the automatic
	// buffer doubles the jobs per claim (9 to 18) and cuts the CPU per job by about a fifth on the
	// server and in the worker, against none.
	Prefetch int
	// Lease is the lease of a claim and what heartbeats renew a job to (a kind may name its
	// own, [HandlerOpts.Lease]). A crashed worker's jobs run again after it. The shortest
	// lease also bounds each round trip of the worker to the server: half of it, from 1 s to
	// 10 s, so a node that stops answering holds the worker up for less than a lease. Default
	// the bus's Config.Lease (30 s).
	Lease time.Duration
	// HeartbeatInterval is how often one batched extend renews every lease the worker holds.
	// It must be shorter than the Lease of the worker and of every kind. Default a third of
	// the shortest lease of the worker and its kinds, and at least 10 ms.
	HeartbeatInterval time.Duration
	// JobTimeout caps a handler's runtime (see [HandlerOpts.Timeout]). Default 1 min
	// ([DefaultJobTimeout]); negative: none.
	JobTimeout time.Duration
	// MaxAttempts is the maximum of claims of a failing job, for kinds that name none.
	// Default: the queue's, else the bus's (see [Bus.SetMaxAttempts]).
	MaxAttempts int
	// Backoff is the retry delay for kinds that name none. Default [DefaultBackoff].
	Backoff func(attempt int64) time.Duration
	// Codec decodes the args of kinds that name none. Default [JSONCodec].
	Codec Codec
	// WakeTimeout is the longest an idle worker blocks on the queue's wake list before it
	// claims and reads the schedule again by itself. Default 5 s ([DefaultWakeTimeout]).
	WakeTimeout time.Duration
	// HousekeepInterval is how often the worker reaps its queue's expired leases and promotes
	// its due scheduled jobs, at most HousekeepLimit of each per round trip (again at once
	// while a batch comes back full). Every worker does it; the scripts are atomic, so no
	// leader is needed and no job moves twice. Default 2 s ([DefaultHousekeepInterval]),
	// jittered by ±20 %; negative: none.
	HousekeepInterval time.Duration
	// HousekeepLimit bounds one reap and one promote. Default 100 ([DefaultLimit]); at most
	// 999999999999999, the scripts' bound.
	HousekeepLimit int
	// Logger receives the worker's log lines: job outcomes at Debug, handler errors and
	// stale answers at Warn, dead jobs and transport errors at Error. Default slog.Default().
	Logger *slog.Logger
	// OnEvent, when set, is called for every [JobEvent], in order, on the worker's loop
	// goroutine: it must return quickly. Default none.
	OnEvent func(JobEvent)
	// ClaimAck is the durability the worker's claims must reach before their handlers start
	// (see [Ack]). With [Replicated], a round trip that claims is followed by WAIT on the
	// queue's primary, so a replica promoted by a failover has seen every claim whose handler
	// runs: it knows the claim's attempts and cannot mint the same token again for a second
	// holder. A claim that falls short of it starts no handler: its jobs are handed back
	// (JobHandedBack, no failure counted) and the worker backs off before it claims again,
	// from 50 ms doubling to 2 s. Each claim still counts in the job's attempts (they only
	// grow: that is the fence), so a replica down for long brings the jobs nearer their
	// MaxAttempts. The cost is one WAIT per round trip that claims, on a connection of its own.
	// Default the zero Ack ([Primary]): handlers start once the primary applied the claim,
	// and a failover to a replica that missed the claim can hand the same token to two
	// holders.
	ClaimAck Ack

	// ID names the worker in the stats it publishes (its field of emq:{<q>}:workers): 1 to 512
	// bytes with no control bytes, unique among the queue's workers. Default
	// <host>-<pid>-<8 random hex>.
	ID string
	// StatsInterval is how often the worker publishes its [WorkerStats] for tools in other
	// processes ([Bus.WorkerStats]); each snapshot stays live for 3 intervals, and the worker
	// withdraws it when it stops. Between 10 ms and 8 h ([MinStatsInterval],
	// [MaxStatsInterval]). Default 5 s ([DefaultStatsInterval]); negative: never.
	StatsInterval time.Duration
	// Middleware wraps every kind's handler, the first outermost, outside the kind's own
	// ([HandlerOpts.Middleware]). Handlers are wrapped once, when they are registered. Default
	// none.
	Middleware []Middleware
}

// withDefaults is c with every zero field set to its default; the Lease's is the bus's.
// HeartbeatInterval's default needs the kinds' leases: Start computes it.
func (c WorkerConfig) withDefaults(busLease time.Duration) WorkerConfig {
	// Past maxConcurrency a bound is no bound (the pool grows with the jobs claimed), and the
	// loop's sums of slots and prefetch must not overflow.
	c.Concurrency = min(cmp.Or(c.Concurrency, DefaultConcurrency), maxConcurrency)
	c.Lease = cmp.Or(c.Lease, busLease)
	c.JobTimeout = cmp.Or(c.JobTimeout, DefaultJobTimeout)
	if c.Backoff == nil {
		c.Backoff = DefaultBackoff
	}
	if c.Codec == nil {
		c.Codec = JSONCodec{}
	}
	c.WakeTimeout = cmp.Or(c.WakeTimeout, DefaultWakeTimeout)
	c.HousekeepInterval = cmp.Or(c.HousekeepInterval, DefaultHousekeepInterval)
	c.HousekeepLimit = cmp.Or(c.HousekeepLimit, DefaultLimit)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c.withReportDefaults()
}

// validate refuses what no default mends; it runs on c.withDefaults(...).
func (c WorkerConfig) validate() error {
	const where = "bus.NewWorker"
	err := notNegative(where,
		field{"Concurrency", int64(c.Concurrency)}, field{"Lease", int64(c.Lease)},
		field{"HeartbeatInterval", int64(c.HeartbeatInterval)}, field{"MaxAttempts", int64(c.MaxAttempts)},
		field{"WakeTimeout", int64(c.WakeTimeout)}, field{"HousekeepLimit", int64(c.HousekeepLimit)})
	if err != nil {
		return err
	}
	if c.HousekeepLimit > maxScriptUint {
		return fmt.Errorf("%w: %s: HousekeepLimit %d is more than %d: reap and promote would refuse every call", ErrInvalid, where, c.HousekeepLimit, int64(maxScriptUint))
	}
	if c.Prefetch > MaxPrefetch {
		return fmt.Errorf("%w: %s: Prefetch %d is more than %d (MaxPrefetch)", ErrInvalid, where, c.Prefetch, MaxPrefetch)
	}
	if err := c.ClaimAck.validate(); err != nil {
		return fmt.Errorf("%s: ClaimAck: %w", where, err)
	}
	if err := c.validateReport(where); err != nil {
		return err
	}
	if c.HeartbeatInterval > 0 && c.HeartbeatInterval >= c.Lease {
		return fmt.Errorf("%w: %s: HeartbeatInterval %v is not shorter than Lease %v: leases would run out between heartbeats", ErrInvalid, where, c.HeartbeatInterval, c.Lease)
	}
	return nil
}

// Worker drains one queue: it claims tasks in batches sized to its free slots (and its
// prefetch buffer), runs their kinds' handlers with bounded concurrency, renews every lease it
// holds with one batched extend per heartbeat, and sends each outcome (complete, retry with
// backoff, dead, snooze) in the round trip of the next claim, completes and claim in one
// script call. Up to two round trips are in flight at once: the next goes out while the
// previous is answered, and replies are applied in the order their round trips were sent.
// A job cancelled while it is held ([Bus.Cancel]) has its handler's context cancelled at the
// next heartbeat (cause [ErrCancelled]), or never starts when it still waits in the prefetch
// buffer, and goes to dead. Idle, it blocks on the queue's wake list and wakes at the earliest
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
	stop        chan struct{} // closed by Close: stop claiming, drain
	hard        chan struct{} // closed when Close's deadline passed: cancel the handlers
	done        chan struct{} // closed when every goroutine of the worker has ended
	stopOnce    sync.Once
	hardOnce    sync.Once
	blockCtx    context.Context // cancelled when the worker drains: aborts a blocked BLPOP
	hardCtx     context.Context // cancelled handBackTimeout after hard: cuts a round trip short
	hardCancel  context.CancelFunc
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
// handler that ignores its context holds it), with nil, or with ctx's error when handlers had
// to be cancelled. Closing a worker that was never started, or closing twice, is allowed.
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
		cut = time.AfterFunc(handBackTimeout, w.hardCancel)
		close(w.hard)
	})
	<-w.done
	if cut != nil {
		cut.Stop()
	}
	return fmt.Errorf("bus: closing the worker of queue %s: running handlers were cancelled: %w", w.q.Name(), ctx.Err())
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
