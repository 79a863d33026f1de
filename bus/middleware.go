package bus

import (
	"context"
	"fmt"

	"github.com/echocache/echocache/internal/panics"
)

// Handler middleware: tracing, metrics and logging compose around a kind's handler without
// the handler knowing. A worker wraps each kind's handler once, when the kind is registered,
// in WorkerConfig.Middleware (outermost first) and then the kind's HandlerOpts.Middleware; a
// kind without middleware runs its handler directly, so it pays nothing for the feature. The
// worker's own events keep their hook, WorkerConfig.OnEvent.

// Call is one run of a handler, as middleware sees it.
type Call struct {
	// Queue is the worker's queue; Kind, the task's kind.
	Queue string
	Kind  string
	// Job is the claimed job: Job.Token is the attempt (1 on the first claim), Job.Payload
	// the whole envelope.
	Job Job
	// Args are the task's encoded args: Job.Payload after the kind and its NUL byte. A
	// middleware may replace them before it calls next; the handler decodes what it gets.
	Args []byte
}

// Handler is a kind's handler seen from outside its types: the task's args still encoded. It
// returns the job's outcome as a handler does: nil completes, a [SnoozeError] snoozes,
// [SkipRetry] sends to dead, any other error fails (retried with backoff). A panic in the
// handler reaches the middleware as a *[PanicError].
type Handler func(ctx context.Context, c *Call) error

// Middleware wraps a Handler: it runs code before and after next (it sees the error, and can
// time the call), may change the context or the Call it passes on, or may return without
// calling next. It is called once per kind, at registration; what it returns runs per job.
type Middleware func(next Handler) Handler

// Chain returns h wrapped in mws, the first outermost: Chain(h, a, b) runs a, which calls b,
// which calls h. It is how a worker composes WorkerConfig.Middleware and a kind's
// HandlerOpts.Middleware, exported for tests and tools that run a handler outside a worker
// (package echotest does).
func Chain(h Handler, mws ...Middleware) Handler {
	for i := len(mws) - 1; i >= 0; i-- {
		h = mws[i](h)
	}
	return h
}

// TaskHandler turns fn into the Handler that a worker runs for a kind registered with
// [Handle]: it decodes Call.Args into T with codec (nil: [JSONCodec]), and args that do not
// decode return an error wrapped in [SkipRetry], as in a worker. Package echotest runs handlers
// through it.
func TaskHandler[T any](fn func(context.Context, *Task[T]) error, codec Codec) Handler {
	if codec == nil {
		codec = JSONCodec{}
	}
	return func(ctx context.Context, c *Call) error {
		t, err := decodeTask[T](codec, c.Kind, c.Job, c.Args)
		if err != nil {
			return err
		}
		return fn(ctx, t)
	}
}

// decodeTask is the task of kind that a handler of T receives for job j with encoded args.
func decodeTask[T any](codec Codec, kind string, j Job, args []byte) (*Task[T], error) {
	t := &Task[T]{Kind: kind, Job: j}
	if err := codec.Unmarshal(args, &t.Args); err != nil {
		return nil, SkipRetry(fmt.Errorf("bus: decoding the args of kind %s: %w", kind, err))
	}
	return t, nil
}

// wrap is fn inside the worker's middleware and then the kind's, or fn itself when there is
// none. A panic of the handler is recovered inside the chain, so the middleware sees it as a
// *PanicError; a middleware's own panic is recovered by the worker, around the chain.
func (w *Worker) wrap(kind string, fn handlerFunc, own []Middleware) handlerFunc {
	if len(w.cfg.Middleware)+len(own) == 0 {
		return fn
	}
	mws := make([]Middleware, 0, len(w.cfg.Middleware)+len(own))
	mws = append(append(mws, w.cfg.Middleware...), own...)
	inner := func(ctx context.Context, c *Call) (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = panics.New("bus: handler of kind "+c.Kind, p)
			}
		}()
		return fn(ctx, c.Job, c.Args)
	}
	h := Chain(inner, mws...)
	queue := w.q.Name()
	return func(ctx context.Context, j Job, args []byte) error {
		return h(ctx, &Call{Queue: queue, Kind: kind, Job: j, Args: args})
	}
}
