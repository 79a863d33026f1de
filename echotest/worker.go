package echotest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/panics"
	"github.com/echocache/echocache/keys"
)

// DefaultQueue is the queue a [Worker] reports in Call.Queue and Job.Queue when its
// WorkerConfig names none.
const DefaultQueue = "echotest"

// Worker runs one kind's handler on one task at a time the way a bus.Worker does, without a
// server: the args are encoded by the kind's codec into a task envelope, the claimed job is
// made up (a fresh JOB id, the attempt as its token), the handler runs inside the worker's
// and the kind's middleware, under the kind's timeout, with a panic turned into a
// *bus.PanicError, and the returned error is read as the worker would read it ([Outcome]).
// When the kind keeps results (HandlerOpts.ResultTTL), the handler's bus.SetResult works as
// in a worker and [Result] tells what the worker would keep. Nothing is enqueued, claimed or
// completed: the test sees the handler's own behaviour. It is safe for concurrent use.
type Worker[T any] struct {
	queue, kind string
	codec       bus.Codec
	timeout     time.Duration // 0: none
	results     bool          // the kind keeps results: the handler may call bus.SetResult
	h           bus.Handler
}

// NewWorker returns a Worker for the handler of kind that a bus.Worker of cfg would register
// with bus.Handle(w, kind, fn, opts). Of cfg it uses Queue (default [DefaultQueue]), Codec,
// JobTimeout and Middleware; of opts, Codec, Timeout, Middleware and ResultTTL (only whether
// it is > 0: a Worker keeps nothing), with the worker's defaults (bus.JSONCodec,
// bus.DefaultJobTimeout; a negative timeout is none; no results). A kind or an option the
// worker would refuse fails the test, with the error of bus.NewWorker or bus.Handle: both run
// on cfg and opts (cfg.Queue defaulted as above), over a Bus of the default bus.Config, so
// that a zero cfg.Lease is bus.DefaultLease as on such a bus.
func NewWorker[T any](tb testing.TB, cfg bus.WorkerConfig, kind string, fn func(context.Context, *bus.Task[T]) error, opts *bus.HandlerOpts) *Worker[T] {
	tb.Helper()
	if err := keys.ValidateName(kind); err != nil {
		tb.Fatalf("echotest: NewWorker: kind: %v", err)
	}
	if fn == nil {
		tb.Fatalf("echotest: NewWorker: kind %s: nil function", kind)
	}
	var o bus.HandlerOpts
	if opts != nil {
		o = *opts
	}
	codec := o.Codec
	if codec == nil {
		codec = cfg.Codec
	}
	if codec == nil {
		codec = bus.JSONCodec{}
	}
	if o.ResultTTL < 0 {
		tb.Fatalf("echotest: NewWorker: kind %s: negative ResultTTL %v", kind, o.ResultTTL)
	}
	cfg.Queue = cmp.Or(cfg.Queue, DefaultQueue)
	if err := refused(cfg, kind, fn, opts); err != nil {
		tb.Fatalf("echotest: NewWorker: %v", err)
	}
	timeout := cmp.Or(o.Timeout, cfg.JobTimeout, bus.DefaultJobTimeout)
	mws := append(append([]bus.Middleware(nil), cfg.Middleware...), o.Middleware...)
	inner := bus.TaskHandler(fn, codec)
	recovered := func(ctx context.Context, c *bus.Call) (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = panics.New("bus: handler of kind "+c.Kind, p)
			}
		}()
		return inner(ctx, c)
	}
	return &Worker[T]{
		queue: cfg.Queue, kind: kind, codec: codec,
		timeout: max(timeout, 0), results: o.ResultTTL > 0, h: bus.Chain(recovered, mws...),
	}
}

// refused is the error of bus.NewWorker for cfg, else of bus.Handle for kind, fn and opts on
// that worker, or nil. Running the worker's own checks, rather than a copy of them, keeps a
// config that production refuses from passing a test. They run over offline: neither calls
// the client, and a worker that is not started sends nothing and needs no closing.
func refused[T any](cfg bus.WorkerConfig, kind string, fn func(context.Context, *bus.Task[T]) error, opts *bus.HandlerOpts) error {
	b, err := bus.New(offline{}, bus.Config{})
	if err != nil {
		return err
	}
	w, err := bus.NewWorker(b, cfg)
	if err != nil {
		return err
	}
	return bus.Handle(w, kind, fn, opts)
}

// offline is a valkey.Client that is never called: a call would panic on the nil interface
// it embeds, so a check of bus that came to reach the server would show at once.
type offline struct{ valkey.Client }

// WorkOpts are the options of [Worker.Work]; nil means defaults.
type WorkOpts struct {
	// Attempt is the claim's attempt, the job's Token: 1 (the default) is the first claim.
	Attempt int64
	// ID is the job's id. Default a fresh one.
	ID keys.JobID
}

// Outcome is what a worker does with a job after its handler returned, read from the error
// alone (whether attempts remain is the queue's business, which a Worker does not know).
type Outcome uint8

// The outcomes.
const (
	// Completed: the handler returned nil; a worker completes (retires) the job.
	Completed Outcome = iota + 1
	// Failed: any other error (a panic included); a worker retries the job with backoff, or
	// sends it to dead once its attempts are spent.
	Failed
	// Dead: the handler returned bus.SkipRetry (or its args did not decode); a worker sends
	// the job to dead at once.
	Dead
	// Snoozed: the handler returned a *bus.SnoozeError; a worker runs the job again after
	// Result.Delay, without counting a failure.
	Snoozed
	// RateLimited: the handler returned bus.RateLimited; a worker hands the job back at once
	// with its attempt refunded, and closes the job's lane (or the queue's jobs without a
	// lane) for Result.Delay.
	RateLimited
)

func (o Outcome) String() string {
	switch o {
	case Completed:
		return "completed"
	case Failed:
		return "failed"
	case Dead:
		return "dead"
	case Snoozed:
		return "snoozed"
	case RateLimited:
		return "rate limited"
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// Result is one run of a handler by [Worker.Work].
type Result struct {
	// Job is the made-up claimed job the handler received (Payload the envelope).
	Job bus.Job
	// Err is what the handler (through the middleware) returned: nil, its error, a
	// *bus.PanicError, or a context error when the timeout ended it.
	Err error
	// Outcome is what a worker would do with the job; Delay is a snooze's delay, or how long
	// a RateLimited closes the lane.
	Outcome Outcome
	Delay   time.Duration
	// Kept reports whether a worker would keep a result for the job: the kind keeps results,
	// the handler called bus.SetResult and returned nil. Value is that result (the last one
	// set); nil when Kept is false.
	Kept  bool
	Value []byte
	// Duration is how long the call took.
	Duration time.Duration
}

// Work runs the handler on a task with args, as a worker would after claiming it, and
// returns the result. ctx is the parent of the handler's context, which ends after the
// kind's timeout with the cause bus.ErrJobTimeout. Args that the codec cannot encode fail
// the test.
func (w *Worker[T]) Work(ctx context.Context, tb testing.TB, args T, opts *WorkOpts) Result {
	tb.Helper()
	var o WorkOpts
	if opts != nil {
		o = *opts
	}
	if o.Attempt < 0 {
		tb.Fatalf("echotest: Work: negative Attempt %d", o.Attempt)
	}
	if o.ID.IsZero() {
		o.ID = keys.NewJobID()
	}
	payload, err := bus.EncodeTask(w.kind, args, w.codec)
	if err != nil {
		tb.Fatalf("echotest: Work: %v", err)
	}
	job := bus.Job{Queue: w.queue, ID: o.ID, Token: cmp.Or(o.Attempt, 1), Payload: payload}
	c := &bus.Call{Queue: w.queue, Kind: w.kind, Job: job, Args: payload[len(w.kind)+1:]}
	if w.timeout > 0 {
		// As in a worker (bus/worker_deadline.go): the context reports the deadline and is
		// cancelled when it passes, cause bus.ErrJobTimeout, so ctx.Err is context.Canceled.
		at := time.Now().Add(w.timeout)
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(deadlineCtx{ctx, at})
		defer cancel(nil)
		timer := time.AfterFunc(time.Until(at), func() { cancel(bus.ErrJobTimeout) })
		defer timer.Stop()
	}
	taken := func() ([]byte, bool) { return nil, false }
	if w.results {
		ctx, taken = bus.RecordResult(ctx)
	}
	start := time.Now()
	err = w.h(ctx, c)
	res := Result{Job: job, Err: err, Duration: time.Since(start)}
	res.Outcome, res.Delay = outcomeOf(err)
	if value, ok := taken(); ok && err == nil { // a failed attempt keeps none, as in a worker
		res.Kept, res.Value = true, value
	}
	return res
}

// outcomeOf reads a handler's error as a worker does (bus/worker_outcome.go): a panic fails
// the job whatever its value; a snooze snoozes it; a RateLimited hands it back; SkipRetry
// sends it to dead.
func outcomeOf(err error) (Outcome, time.Duration) {
	if err == nil {
		return Completed, 0
	}
	if _, panicked := err.(*bus.PanicError); panicked {
		return Failed, 0
	}
	var snooze *bus.SnoozeError
	var limited *bus.RateLimitedError
	switch {
	case errors.As(err, &snooze):
		return Snoozed, snooze.Delay
	case errors.As(err, &limited):
		return RateLimited, limited.Delay
	case errors.Is(err, bus.ErrSkipRetry):
		return Dead, 0
	}
	return Failed, 0
}

// deadlineCtx is ctx reporting the deadline at, or ctx's own when that is sooner; it does not
// end by itself at it (Work's timer cancels the handler's context).
type deadlineCtx struct {
	context.Context
	at time.Time
}

func (c deadlineCtx) Deadline() (time.Time, bool) {
	if d, ok := c.Context.Deadline(); ok && d.Before(c.at) {
		return d, true
	}
	return c.at, true
}
