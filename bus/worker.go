package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
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
)

// Internal bounds of the worker's loop.
const (
	// roundTripTimeout bounds one pipelined round trip of the loop.
	roundTripTimeout = 10 * time.Second
	// handBackTimeout bounds the last round trip after Close's deadline passed.
	handBackTimeout = 2 * time.Second
	// maxClaim bounds one claim, whatever the concurrency.
	maxClaim = 1000
	// minBeat is the shortest heartbeat interval.
	minBeat = 10 * time.Millisecond
)

// WorkerConfig configures a [Worker]. Queue is required; every zero field means its default.
type WorkerConfig struct {
	// Queue is the queue the worker drains. One worker drains one queue; run one worker per
	// queue (they may share a Bus).
	Queue string
	// Concurrency is how many handlers run at once. Claims never take more jobs than there
	// are free slots. Default 10 ([DefaultConcurrency]).
	Concurrency int
	// Lease is the lease of a claim and what heartbeats renew a job to (a kind may name its
	// own, [HandlerOpts.Lease]). A crashed worker's jobs run again after it. Default the
	// bus's Config.Lease (30 s).
	Lease time.Duration
	// HeartbeatInterval is how often one batched extend renews every lease the worker holds.
	// Default a third of the shortest lease of the worker and its kinds.
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
	// HousekeepLimit bounds one reap and one promote. Default 100 ([DefaultLimit]).
	HousekeepLimit int
	// Logger receives the worker's log lines: job outcomes at Debug, handler errors and
	// stale answers at Warn, dead jobs and transport errors at Error. Default slog.Default().
	Logger *slog.Logger
	// OnEvent, when set, is called for every [JobEvent], in order, on the worker's loop
	// goroutine: it must return quickly.
	OnEvent func(JobEvent)
}

// JobEventType says what happened to a job.
type JobEventType uint8

// The job events.
const (
	// JobClaimed: the worker claimed the job and starts its handler.
	JobClaimed JobEventType = iota + 1
	// JobExtended: a heartbeat renewed the job's lease.
	JobExtended
	// JobCompleted: the handler returned nil and the complete was accepted: the job is retired.
	JobCompleted
	// JobRetried: the handler failed and the job was scheduled again (JobEvent.At).
	JobRetried
	// JobDead: the job went to dead (attempts spent, [SkipRetry], no envelope).
	JobDead
	// JobSnoozed: the handler returned a [SnoozeError]; the job runs again at JobEvent.At.
	JobSnoozed
	// JobHandedBack: Close's deadline cancelled the handler and the job went back to pending
	// without counting a failure.
	JobHandedBack
	// JobStale: a complete, fail or snooze answered EMQSTALE: the job was no longer this
	// worker's (JobEvent.Err is the *StaleError).
	JobStale
	// JobLeaseLost: a heartbeat's extend answered EMQSTALE: the handler's context was
	// cancelled (cause [ErrLeaseLost]) and its outcome will not be sent.
	JobLeaseLost
)

var eventNames = [...]string{"", "claimed", "extended", "completed", "retried", "dead", "snoozed", "handed back", "stale", "lease lost"}

// String is the event's name.
func (t JobEventType) String() string {
	if int(t) < len(eventNames) && t > 0 {
		return eventNames[t]
	}
	return fmt.Sprintf("JobEventType(%d)", uint8(t))
}

// JobEvent is one thing that happened to one job in a worker.
type JobEvent struct {
	Type JobEventType
	Job  Job
	// Kind is the task's kind; empty when the payload is not an envelope.
	Kind string
	// Err is the handler's error (retried, dead), or the *StaleError (stale, lease lost).
	Err error
	// Duration is how long the handler ran (completed, retried, dead, snoozed, handed back).
	Duration time.Duration
	// At is the run-at of a retried or snoozed job (server clock).
	At time.Time
}

// WorkerStats are a worker's counters for its queue since Start.
type WorkerStats struct {
	Queue string
	// Running is how many handlers run now.
	Running int
	// Claimed counts jobs claimed; Completed, jobs retired by a complete this worker sent.
	Claimed, Completed int64
	// Failed counts handler failures (errors, panics, timeouts, unknown kinds); each one is
	// then Retried or Dead.
	Failed, Retried, Dead int64
	// Snoozed counts snoozes; HandedBack, jobs handed back by Close after its deadline.
	Snoozed, HandedBack int64
	// Stale counts completes, fails and snoozes answered EMQSTALE; LeaseLost, jobs whose
	// heartbeat found the lease lost.
	Stale, LeaseLost int64
}

// Worker drains one queue: it claims tasks in batches sized to its free slots, runs their
// kinds' handlers with bounded concurrency, renews every lease it holds with one batched
// extend per heartbeat, and sends each outcome (complete, retry with backoff, dead, snooze)
// pipelined with the next claim in one round trip. Idle, it blocks on the queue's wake list
// and wakes at the earliest scheduled run-at; it never polls on a fixed sleep. It reaps and
// promotes its queue on a timer. See the package doc for a complete flow.
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
	results    chan *running // finished handlers; capacity Concurrency, so a send never blocks
	work       chan *running // jobs for the handler goroutines; capacity Concurrency
	pool       sync.WaitGroup
	wake       chan bool     // the blocker's answers: true for a marker (or an error), false for a timeout
	blockReq   chan struct{} // the loop asks the blocker to block once
	stop       chan struct{} // closed by Close: stop claiming, drain
	hard       chan struct{} // closed when Close's deadline passed: cancel the handlers
	done       chan struct{} // closed when every goroutine of the worker has ended
	stopOnce   sync.Once
	hardOnce   sync.Once
	blockCtx   context.Context // cancelled when the worker drains: aborts a blocked BLPOP
	hardCtx    context.Context // cancelled with hard: cuts a round trip short
	hardCancel context.CancelFunc
	blockStop  context.CancelFunc
	beat       time.Duration

	// Precomputed KEYS of the scripts the loop runs.
	kClaim, kFail, kSnooze, kExtend, kReap, kPromote, kDue []string

	running atomic.Int64
	stats   struct {
		claimed, completed, failed, retried, dead, snoozed, handedBack, stale, leaseLost atomic.Int64
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
	if cfg.Concurrency < 0 || cfg.Lease < 0 || cfg.HeartbeatInterval < 0 || cfg.MaxAttempts < 0 || cfg.WakeTimeout < 0 || cfg.HousekeepLimit < 0 {
		return nil, fmt.Errorf("%w: bus.NewWorker: Concurrency, Lease, HeartbeatInterval, MaxAttempts, WakeTimeout and HousekeepLimit must not be negative", ErrInvalid)
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.Lease == 0 {
		cfg.Lease = b.cfg.Lease
	}
	if cfg.JobTimeout == 0 {
		cfg.JobTimeout = DefaultJobTimeout
	}
	if cfg.Backoff == nil {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.Codec == nil {
		cfg.Codec = JSONCodec{}
	}
	if cfg.WakeTimeout == 0 {
		cfg.WakeTimeout = DefaultWakeTimeout
	}
	if cfg.HousekeepInterval == 0 {
		cfg.HousekeepInterval = DefaultHousekeepInterval
	}
	if cfg.HousekeepLimit == 0 {
		cfg.HousekeepLimit = DefaultLimit
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	w := &Worker{
		b: b, q: q, cfg: cfg, handlers: map[string]*handler{},
		log:      cfg.Logger.With("queue", q.Name()),
		kClaim:   keysOf(scClaim, q),
		kFail:    keysOf(scFail, q),
		kSnooze:  keysOf(scSnooze, q),
		kExtend:  keysOf(scExtend, q),
		kReap:    keysOf(scReap, q),
		kPromote: keysOf(scPromote, q),
		kDue:     keysOf(scDue, q),
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
	if o.MaxAttempts < 0 || o.Lease < 0 {
		return fmt.Errorf("%w: handler of kind %s: negative MaxAttempts or Lease", ErrInvalid, kind)
	}
	h := &handler{kind: kind, codec: o.Codec, maxAttempts: o.MaxAttempts, backoff: o.Backoff, lease: o.Lease, timeout: o.Timeout}
	if h.codec == nil {
		h.codec = w.cfg.Codec
	}
	if h.maxAttempts == 0 {
		h.maxAttempts = w.cfg.MaxAttempts
	}
	if h.backoff == nil {
		h.backoff = w.cfg.Backoff
	}
	if h.lease == 0 {
		h.lease = w.cfg.Lease
	}
	if h.timeout == 0 {
		h.timeout = w.cfg.JobTimeout
	}
	if h.timeout < 0 {
		h.timeout = 0
	}
	h.fn = build(h)
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
// housekeeping) and the blocker (the wake list's BLPOP, on a connection of its own, so
// blocking never stalls the client's shared pipeline). It returns at once.
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
	w.beat = w.cfg.HeartbeatInterval
	if w.beat == 0 {
		shortest := w.cfg.Lease
		for _, h := range w.handlers {
			shortest = min(shortest, h.lease)
		}
		w.beat = shortest / 3
	}
	w.beat = max(w.beat, minBeat)
	w.results = make(chan *running, w.cfg.Concurrency)
	w.work = make(chan *running, w.cfg.Concurrency)
	w.wake = make(chan bool, 1)
	w.blockReq = make(chan struct{}, 1)
	w.stop = make(chan struct{})
	w.hard = make(chan struct{})
	w.done = make(chan struct{})
	w.blockCtx, w.blockStop = context.WithCancel(context.Background())
	w.hardCtx, w.hardCancel = context.WithCancel(context.Background())
	var blocker sync.WaitGroup
	blocker.Go(w.blocker)
	go func() {
		w.loop()
		close(w.work)
		w.pool.Wait()
		w.blockStop()
		blocker.Wait()
		w.hardCancel()
		close(w.done)
	}()
	return nil
}

// Close stops the worker: it stops claiming, lets running handlers finish and sends their
// outcomes, renewing their leases meanwhile. When ctx ends first, it cancels the handlers'
// contexts (cause [ErrWorkerClosed]), waits for them to return, completes the jobs whose
// handler returned nil and hands the others back to pending without counting a failure;
// a job whose hand-back cannot be sent is left to its lease's expiry. Close returns when
// every goroutine of the worker has ended (so a handler that ignores its context holds it),
// with nil, or with ctx's error when handlers had to be cancelled. Closing a worker that was
// never started, or closing twice, is allowed.
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
	w.hardOnce.Do(func() {
		w.hardCancel() // a round trip in flight ends now; its outcomes go out again, briefly
		close(w.hard)
	})
	<-w.done
	return fmt.Errorf("bus: closing the worker of queue %s: running handlers were cancelled: %w", w.q.Name(), ctx.Err())
}

// Stats returns the worker's counters.
func (w *Worker) Stats() WorkerStats {
	s := &w.stats
	return WorkerStats{
		Queue:     w.q.Name(),
		Running:   int(w.running.Load()),
		Claimed:   s.claimed.Load(),
		Completed: s.completed.Load(), Failed: s.failed.Load(), Retried: s.retried.Load(), Dead: s.dead.Load(),
		Snoozed: s.snoozed.Load(), HandedBack: s.handedBack.Load(), Stale: s.stale.Load(), LeaseLost: s.leaseLost.Load(),
	}
}

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

// blocker blocks on the wake list when the loop asks, and answers on w.wake.
func (w *Worker) blocker() {
	timeout := w.cfg.WakeTimeout.Seconds()
	backoff := 50 * time.Millisecond
	for {
		select {
		case <-w.blockReq:
		case <-w.blockCtx.Done():
			return
		}
		c := w.b.client
		err := c.Do(w.blockCtx, c.B().Blpop().Key(w.q.Wake()).Timeout(timeout).Build()).Error()
		if w.blockCtx.Err() != nil {
			return
		}
		marker := err == nil
		if err != nil && !isNil(err) {
			// The server is unreachable or refused: wait before the loop tries again, so a
			// dead server does not make the worker spin.
			w.log.Error("bus: worker: waiting on the wake list", "err", err)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-w.blockCtx.Done():
				t.Stop()
				return
			}
			backoff = min(backoff*2, w.cfg.WakeTimeout)
			marker = true
		} else {
			backoff = 50 * time.Millisecond
		}
		select {
		case w.wake <- marker:
		case <-w.blockCtx.Done():
			return
		}
	}
}

// loopState is the loop's own state; only the loop goroutine touches it.
type loopState struct {
	held     map[*running]struct{} // a job reaped from under its handler and claimed again is held twice
	outcomes []*running            // finished handlers whose outcome is not yet accepted
	running  int                   // handlers running

	hungry    bool // claim when slots are free: the last claim came back full, or a wake came
	streaming bool // the last claim came back full: no need to read the schedule
	dueCheck  bool // read the schedule's head at the next round trip
	blocking  bool // a block request is outstanding
	draining  bool
	hard      bool
	beatDue   bool
	hkDue     bool
	errWait   time.Duration // backoff after a failed round trip

	pool    int  // handler goroutines started
	started bool // handlers were started since the loop last collected results

	due   *time.Timer // wakes the loop when scheduled work falls due
	dueAt time.Time   // when due fires (local monotonic clock); zero when stopped
}

// armDue makes the due timer fire after d unless it fires sooner already.
func (st *loopState) armDue(d time.Duration) {
	at := time.Now().Add(d)
	if st.dueAt.IsZero() || at.Before(st.dueAt) || st.dueAt.Before(time.Now()) {
		st.due.Reset(d)
		st.dueAt = at
	}
}

// loop is the worker's one goroutine that talks to the server (besides the blocker): every
// round trip is one pipeline of the outcomes of finished handlers, the heartbeat's extend,
// housekeeping, the claim for the free slots and the schedule's head, in that order.
func (w *Worker) loop() {
	st := &loopState{held: map[*running]struct{}{}, hungry: true, dueCheck: true, hkDue: w.cfg.HousekeepInterval > 0}
	beat := time.NewTimer(w.beat)
	defer beat.Stop()
	hk := time.NewTimer(w.jitter(w.cfg.HousekeepInterval))
	if w.cfg.HousekeepInterval < 0 {
		hk.Stop()
	}
	defer hk.Stop()
	st.due = time.NewTimer(time.Hour)
	st.due.Stop()
	defer st.due.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	stop, hard := w.stop, w.hard
	waitingRetry := false

	for {
		if st.started {
			// Let the handlers just started run before collecting: fast handlers finish
			// meanwhile, and their outcomes share the next round trip.
			st.started = false
			runtime.Gosched()
		}
		for drained := false; !drained; {
			select {
			case r := <-w.results:
				w.finished(st, r)
			default:
				drained = true
			}
		}
		if !waitingRetry {
			free := w.cfg.Concurrency - st.running
			claim := 0
			if st.hungry && !st.draining && free > 0 {
				claim = min(free, maxClaim)
			}
			// A round trip that reaps also renews this worker's leases first (they come
			// before the reap in the pipeline), so a worker that stalled past its leases never
			// reaps its own running jobs.
			beatNow := (st.beatDue || st.hkDue) && len(st.held) > len(st.outcomes)
			if len(st.outcomes) > 0 || claim > 0 || beatNow || st.hkDue || (st.dueCheck && !st.draining) {
				if st.beatDue || beatNow {
					st.beatDue = false
					beat.Reset(w.beat)
				}
				if w.roundTrip(st, claim, beatNow) {
					st.errWait = 0
				} else {
					st.errWait = min(max(st.errWait*2, 50*time.Millisecond), 2*time.Second)
					if st.hard {
						w.abandon(st) // the server is not answering and the deadline has passed
					} else {
						retry.Reset(st.errWait)
						waitingRetry = true
					}
				}
				continue
			}
		}
		if st.draining && st.running == 0 && len(st.outcomes) == 0 {
			return
		}
		if !st.draining && !st.hungry && !st.blocking && st.running < w.cfg.Concurrency {
			st.blocking = true
			w.blockReq <- struct{}{} // capacity 1, and only the loop sends while no block is outstanding
		}
		select {
		case r := <-w.results:
			w.finished(st, r)
		case marker := <-w.wake:
			st.blocking = false
			st.hungry = true
			if !marker {
				st.dueCheck = true // a timeout: also look at the schedule again
			}
		case <-st.due.C:
			st.dueAt = time.Time{}
			st.hungry = true
			st.dueCheck = true
		case <-beat.C:
			st.beatDue = true
			if len(st.held) == 0 {
				st.beatDue = false
				beat.Reset(w.beat)
			}
		case <-hk.C:
			st.hkDue = true
			hk.Reset(w.jitter(w.cfg.HousekeepInterval))
		case <-retry.C:
			waitingRetry = false
		case <-stop:
			stop = nil
			st.draining = true
			w.blockStop() // abort a blocked BLPOP; the blocker ends
		case <-hard:
			hard = nil
			st.hard = true
			for r := range st.held {
				if !r.finished {
					r.cancel(ErrWorkerClosed)
				}
			}
		}
	}
}

// jitter spreads d by ±20 % so that workers started together do not housekeep together.
func (w *Worker) jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return time.Hour
	}
	return d - d/5 + rand.N(2*d/5+1)
}

// step is one script of a round trip and what to do with its reply.
type step struct {
	run   lua.Run
	reply func(result) bool // false: a transport error, the round trip failed
}

// roundTrip sends one pipeline and applies the replies. It reports false when the server did
// not answer (the outcomes stay queued and are sent again).
func (w *Worker) roundTrip(st *loopState, claim int, beatNow bool) bool {
	steps := make([]step, 0, len(st.outcomes)+4)
	sending := st.outcomes
	st.outcomes = nil
	var kept []*running
	var completes []*running
	for _, r := range sending {
		if r.preErr == nil && r.err == nil {
			completes = append(completes, r)
			continue
		}
		steps = append(steps, w.outcomeStep(st, r, func() { kept = append(kept, r) }))
	}
	if len(completes) > 0 {
		steps = append(steps, w.completeStep(st, completes, func() { kept = append(kept, completes...) }))
	}
	if beatNow {
		steps = append(steps, w.extendSteps(st)...)
	}
	if st.hkDue {
		st.hkDue = false
		steps = append(steps, w.housekeepSteps(st)...)
	}
	if claim > 0 {
		steps = append(steps, w.claimStep(st, claim))
	}
	if st.dueCheck && !st.draining {
		st.dueCheck = false
		steps = append(steps, w.dueStep(st))
	}
	if len(steps) == 0 {
		return true
	}
	parent, timeout := w.hardCtx, roundTripTimeout
	if st.hard {
		parent, timeout = context.Background(), handBackTimeout
	}
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	runs := make([]lua.Run, len(steps))
	for i, s := range steps {
		runs[i] = s.run
	}
	out, err := w.b.execMulti(ctx, runs, nil)
	if err != nil || len(out) != len(steps) { // not expected without an Ack: errors come per reply
		w.log.Error("bus: worker: round trip", "err", err)
		st.outcomes = append(sending, st.outcomes...)
		st.hungry = st.hungry || claim > 0
		return false
	}
	ok := true
	for i, s := range steps {
		if !s.reply(out[i]) {
			ok = false
		}
	}
	st.outcomes = append(kept, st.outcomes...)
	return ok
}

// transient reports whether err is not the script's answer (a transport error, a timeout):
// the call may be sent again.
func transient(err error) bool {
	if err == nil {
		return false
	}
	var se *scriptError
	return !errors.As(err, &se) && !errors.Is(err, ErrWrongType)
}

// finished takes a handler's return.
func (w *Worker) finished(st *loopState, r *running) {
	r.finished = true
	st.running--
	w.running.Add(-1)
	r.cancel(nil)
	if r.stopT != nil {
		r.stopT()
	}
	if r.lost {
		delete(st.held, r) // the outcome would answer EMQSTALE: the job is someone else's
		return
	}
	st.outcomes = append(st.outcomes, r)
}

// outcomeStep is the script that records the outcome of a job whose handler failed, snoozed
// or was cancelled by Close (completes go in one completeStep). requeue is called when the
// reply was a transport error, to send it again.
func (w *Worker) outcomeStep(st *loopState, r *running, requeue func()) step {
	id, tok := r.job.ID.String(), itoa(r.job.Token)
	err := r.err
	if r.preErr != nil {
		err = r.preErr
	}
	var snooze *SnoozeError
	switch {
	case errors.As(err, &snooze):
		return w.snoozeStep(st, r, snooze.Delay, JobSnoozed, requeue)
	case st.hard && errors.Is(context.Cause(r.ctx), ErrWorkerClosed):
		// Cancelled by Close's deadline: hand the job back without counting a failure.
		return w.snoozeStep(st, r, 0, JobHandedBack, requeue)
	}
	maxAttempts := w.cfg.MaxAttempts
	backoff := w.cfg.Backoff
	if r.h != nil {
		maxAttempts, backoff = r.h.maxAttempts, r.h.backoff
	}
	if errors.Is(err, ErrSkipRetry) || errors.Is(err, ErrNoEnvelope) {
		maxAttempts = 1 // the fail script sends it to dead
	}
	delay := max(backoff(r.job.Token), 0)
	args := []string{id, tok, itoa(ms(delay)), itoa(int64(maxAttempts)), itoa(int64(w.b.cfg.MaxAttempts))}
	return step{lua.Run{Script: scFail, Keys: w.kFail, Args: args}, func(res result) bool {
		out, ok, retry := w.settle(st, r, "fail", res, requeue)
		if !ok {
			return !retry
		}
		w.stats.failed.Add(1)
		if out.State == StateScheduled {
			st.armDue(delay + time.Millisecond) // wake for the retry, if no worker took it sooner
		}
		e := JobEvent{Type: JobRetried, Job: r.job, Kind: r.kind, Err: err, Duration: r.dur, At: out.At}
		if out.State == StateDead {
			e.Type = JobDead
		}
		w.emit(e)
		return true
	}}
}

// settle reads the reply of a fail or snooze of r. A transient error requeues the step
// (retry); otherwise r leaves the held set and a refusal (EMQSTALE and the like) is reported,
// and ok says the outcome was accepted.
func (w *Worker) settle(st *loopState, r *running, op string, res result, requeue func()) (out Outcome, ok, retry bool) {
	out, err := outcome(op, call{op, w.q.Name(), r.job.ID, r.job.Token}, res.msg, res.err)
	if transient(res.err) {
		w.log.Error("bus: worker: "+op, "job", r.job.ID, "err", err)
		requeue()
		return out, false, true
	}
	delete(st.held, r)
	if err != nil {
		w.refused(r, err)
		return out, false, false
	}
	return out, true, false
}

// completeStep retires the jobs whose handler returned nil, in one completemany call: one
// script run for the batch, each job still fenced by its own token.
func (w *Worker) completeStep(st *loopState, rs []*running, requeue func()) step {
	jobs := make([]Job, len(rs))
	for i, r := range rs {
		jobs[i] = r.job
	}
	return step{completeManyRun(w.q, jobs), func(res result) bool {
		if transient(res.err) {
			w.log.Error("bus: worker: complete", "err", errorFor(call{op: "complete", queue: w.q.Name()}, res.err))
			requeue()
			return false
		}
		var refused []*StaleError
		err := errorFor(call{op: "complete", queue: w.q.Name()}, res.err)
		if err == nil {
			refused, err = completeManyReply(w.q.Name(), jobs, res.msg)
		}
		if err != nil { // refused as a whole (a damaged key): the leases will run out
			w.log.Error("bus: worker: complete", "err", err)
			for _, r := range rs {
				delete(st.held, r)
			}
			return true
		}
		stale := make(map[int]*StaleError, len(refused))
		for _, e := range refused {
			for i, j := range jobs {
				if j.ID == e.ID && j.Token == e.Token {
					stale[i] = e
				}
			}
		}
		for i, r := range rs {
			delete(st.held, r)
			if e := stale[i]; e != nil {
				w.emit(JobEvent{Type: JobStale, Job: r.job, Kind: r.kind, Err: e, Duration: r.dur})
				continue
			}
			w.emit(JobEvent{Type: JobCompleted, Job: r.job, Kind: r.kind, Duration: r.dur})
		}
		return true
	}}
}

func (w *Worker) snoozeStep(st *loopState, r *running, delay time.Duration, typ JobEventType, requeue func()) step {
	args := []string{r.job.ID.String(), itoa(r.job.Token), itoa(ms(delay))}
	return step{lua.Run{Script: scSnooze, Keys: w.kSnooze, Args: args}, func(res result) bool {
		out, ok, retry := w.settle(st, r, "snooze", res, requeue)
		if !ok {
			return !retry
		}
		if out.State == StateScheduled {
			st.armDue(delay + time.Millisecond)
		}
		w.emit(JobEvent{Type: typ, Job: r.job, Kind: r.kind, Duration: r.dur, At: out.At})
		return true
	}}
}

// refused reports a fail or snooze the server refused: EMQSTALE (the job is someone else's
// now) or a damaged key, whose job is left to its lease.
func (w *Worker) refused(r *running, err error) {
	if errors.Is(err, ErrStale) {
		w.emit(JobEvent{Type: JobStale, Job: r.job, Kind: r.kind, Err: err, Duration: r.dur})
		return
	}
	w.log.Error("bus: worker: the outcome was refused; the job runs again after its lease", "job", r.job.ID, "kind", r.kind, "err", err)
}

// extendSteps renew the lease of every running handler's job (not of those whose outcome is
// being sent, nor of those past their timeout), one extend per lease length: one in all
// unless kinds name their own leases.
func (w *Worker) extendSteps(st *loopState) []step {
	now := time.Now()
	// One group per lease length; a job held twice (reaped, then claimed again by this
	// worker) goes to a group of its own, since the reply names lost jobs by id only.
	type group struct {
		lease time.Duration
		jobs  []*running
		ids   map[keys.JobID]bool
	}
	var groups []*group
	for r := range st.held {
		if r.lost || r.finished || r.timedOut(now) {
			continue
		}
		var g *group
		for _, c := range groups {
			if c.lease == r.lease && !c.ids[r.job.ID] {
				g = c
				break
			}
		}
		if g == nil {
			g = &group{lease: r.lease, ids: map[keys.JobID]bool{}}
			groups = append(groups, g)
		}
		g.jobs = append(g.jobs, r)
		g.ids[r.job.ID] = true
	}
	var steps []step
	for _, g := range groups {
		rs := g.jobs
		args := make([]string, 1, 1+2*len(rs))
		args[0] = itoa(ms(g.lease))
		byID := make(map[string]*running, len(rs))
		for _, r := range rs {
			args = append(args, r.job.ID.String(), itoa(r.job.Token))
			byID[r.job.ID.String()] = r
		}
		steps = append(steps, step{lua.Run{Script: scExtend, Keys: w.kExtend, Args: args}, func(res result) bool {
			if res.err != nil {
				w.log.Error("bus: worker: heartbeat", "err", errorFor(call{op: "extend", queue: w.q.Name()}, res.err))
				return !transient(res.err)
			}
			arr, err := res.msg.ToArray()
			if err != nil || len(arr) != 2 {
				w.log.Error("bus: worker: heartbeat", "err", protocolError("extend", "reply %v", res.msg))
				return true
			}
			flat, _ := arr[1].AsStrSlice()
			lost := make(map[string]bool, len(flat)/2)
			for i := 0; i+1 < len(flat); i += 2 {
				lost[flat[i]] = true
				r := byID[flat[i]]
				if r == nil || r.lost {
					continue
				}
				r.lost = true
				reason := StaleReason(flat[i+1][len("EMQSTALE "):])
				serr := &StaleError{Op: "extend", Queue: w.q.Name(), ID: r.job.ID, Token: r.job.Token, Reason: reason}
				// Count it before the handler can see it: a caller that learns of the loss
				// from the handler's context finds it in Stats already.
				w.emit(JobEvent{Type: JobLeaseLost, Job: r.job, Kind: r.kind, Err: serr})
				r.cancel(ErrLeaseLost)
				if r.finished {
					delete(st.held, r)
				}
			}
			for id, r := range byID {
				if !lost[id] {
					w.emit(JobEvent{Type: JobExtended, Job: r.job, Kind: r.kind})
				}
			}
			return true
		}})
	}
	return steps
}

// housekeepSteps reap and promote, bounded; a full batch asks for another round at once.
func (w *Worker) housekeepSteps(st *loopState) []step {
	limit := itoa(int64(w.cfg.HousekeepLimit))
	reap := step{lua.Run{Script: scReap, Keys: w.kReap, Args: []string{limit, "0", itoa(int64(w.b.cfg.MaxAttempts))}}, func(res result) bool {
		if res.err != nil {
			w.log.Error("bus: worker: reap", "err", errorFor(call{op: "reap", queue: w.q.Name()}, res.err))
			return !transient(res.err)
		}
		arr, err := res.msg.ToArray()
		if err != nil || len(arr) != 2 {
			return true
		}
		requeued, _ := arr[0].AsStrSlice()
		dead, _ := arr[1].AsStrSlice()
		if n := len(requeued) + len(dead); n > 0 {
			w.log.Info("bus: worker: reaped expired leases", "requeued", len(requeued), "dead", len(dead))
			if n >= w.cfg.HousekeepLimit {
				st.hkDue = true
			}
			if len(requeued) > 0 {
				st.hungry = true
			}
		}
		return true
	}}
	promote := step{lua.Run{Script: scPromote, Keys: w.kPromote, Args: []string{limit}}, func(res result) bool {
		if res.err != nil {
			w.log.Error("bus: worker: promote", "err", errorFor(call{op: "promote", queue: w.q.Name()}, res.err))
			return !transient(res.err)
		}
		moved, _ := res.msg.AsStrSlice()
		if len(moved) > 0 {
			st.hungry = true
			if len(moved) >= w.cfg.HousekeepLimit {
				st.hkDue = true
			}
		}
		return true
	}}
	return []step{reap, promote}
}

// claimStep claims up to n jobs and starts their handlers.
func (w *Worker) claimStep(st *loopState, n int) step {
	args := []string{itoa(ms(w.cfg.Lease)), itoa(int64(n)), itoa(int64(w.b.cfg.PromoteLimit))}
	return step{lua.Run{Script: scClaim, Keys: w.kClaim, Args: args}, func(res result) bool {
		jobs, err := claimed(w.q, res.msg, res.err)
		switch {
		case errors.Is(err, ErrPaused):
			st.hungry, st.streaming = false, false
			return true
		case transient(res.err):
			w.log.Error("bus: worker: claim", "err", err)
			st.hungry = true // again after the round trip's backoff
			return false
		case err != nil:
			// The server refused the claim (a key of the wrong type): try again on the next
			// wake or wake timeout, not at once.
			w.log.Error("bus: worker: claim", "err", err)
			st.hungry, st.streaming = false, false
			return true
		}
		full := len(jobs) == n
		if !full {
			st.dueCheck = st.dueCheck || st.streaming // leaving a stream: learn when work falls due
		}
		st.hungry, st.streaming = full, full
		for _, j := range jobs {
			w.start(st, j)
		}
		return true
	}}
}

// dueStep reads the schedule's head and arms the due timer for its run-at.
func (w *Worker) dueStep(st *loopState) step {
	return step{lua.Run{Script: scDue, Keys: w.kDue, Args: nil}, func(res result) bool {
		if res.err != nil {
			w.log.Error("bus: worker: reading the schedule", "err", errorFor(call{op: "due", queue: w.q.Name()}, res.err))
			st.dueCheck = transient(res.err)
			return !st.dueCheck
		}
		wait, ok, err := dueReply(res.msg)
		switch {
		case err != nil:
			w.log.Error("bus: worker: reading the schedule", "err", err)
		case !ok:
			st.due.Stop()
			st.dueAt = time.Time{}
		default:
			st.due.Reset(wait + time.Millisecond) // the server's clock has ms resolution
			st.dueAt = time.Now().Add(wait + time.Millisecond)
		}
		return true
	}}
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

// abandon gives up on the outcomes that could not be sent after Close's deadline: their jobs
// are left to lease expiry.
func (w *Worker) abandon(st *loopState) {
	for _, r := range st.outcomes {
		w.log.Warn("bus: worker: closing: the outcome could not be sent; the job runs again after its lease", "job", r.job.ID, "kind", r.kind)
		delete(st.held, r)
	}
	st.outcomes = nil
}

// emit counts, logs and reports one event.
func (w *Worker) emit(e JobEvent) {
	s := &w.stats
	level := slog.LevelDebug
	switch e.Type {
	case JobCompleted:
		s.completed.Add(1)
	case JobRetried:
		s.retried.Add(1)
		level = slog.LevelWarn
	case JobDead:
		s.dead.Add(1)
		level = slog.LevelError
	case JobSnoozed:
		s.snoozed.Add(1)
	case JobHandedBack:
		s.handedBack.Add(1)
		level = slog.LevelInfo
	case JobStale:
		s.stale.Add(1)
		level = slog.LevelWarn
	case JobLeaseLost:
		s.leaseLost.Add(1)
		level = slog.LevelWarn
	}
	if w.log.Enabled(context.Background(), level) {
		attrs := []any{"job", e.Job.ID, "kind", e.Kind, "token", e.Job.Token}
		if e.Err != nil {
			attrs = append(attrs, "err", e.Err)
		}
		if e.Duration > 0 {
			attrs = append(attrs, "duration", e.Duration)
		}
		if !e.At.IsZero() {
			attrs = append(attrs, "at", e.At)
		}
		w.log.Log(context.Background(), level, "bus: job "+e.Type.String(), attrs...)
	}
	if w.cfg.OnEvent != nil {
		w.cfg.OnEvent(e)
	}
}
