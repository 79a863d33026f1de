package bus_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
)

// TestHandBackOfCancelledBufferedJob: a job waiting in the prefetch buffer is cancelled, and
// Close's deadline passes before a heartbeat tells the worker. Its hand-back (a snooze) is
// refused as not active; settle marks it cancelled and queues it again, to be failed, which
// sends a cancelling job to dead. The hand-back was sent again instead, refused again, and the
// job counted Stale and left cancelling until its lease ran out.
func TestHandBackOfCancelledBufferedJob(t *testing.T) {
	t.Parallel()
	ctx, _, b, name, _ := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	w, err := bus.NewWorker(b, bus.WorkerConfig{Queue: name, Concurrency: 1, Prefetch: 3, HeartbeatInterval: 10 * time.Second, Logger: quiet})
	require.NoError(t, err)
	started := make(chan struct{}, 10)
	bus.MustHandle(w, "block", func(ctx context.Context, _ *bus.Task[args]) error {
		started <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	}, nil)
	require.NoError(t, w.Start())
	ids := enqueueTasks(t, b, name, "block", 3, "")
	<-started
	valkeytest.Eventually(t, 10*time.Second, "three jobs held, two in the buffer", func() bool { return w.Stats().Claimed == 3 })
	_, err = b.Cancel(ctx, name, ids[1])
	require.NoError(t, err)
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_ = w.Close(cctx) // past its deadline: the buffered jobs are handed back
	s := w.Stats()
	require.Zero(t, s.Stale, "the cancelled job is not stale")
	info, err := b.Lookup(ctx, name, ids[1])
	require.NoError(t, err)
	require.Equal(t, bus.StateDead, info.State, "the cancelled job is dead at once, not after its lease")
}

// TestPanicThroughWrappingMiddleware: a handler's own panic fails the job whatever its value,
// also when a middleware wraps the error (fmt.Errorf %w, as logging and metrics middleware
// do). The *PanicError was found by a type assertion only, so behind a wrapper the Snooze,
// RateLimited or SkipRetry the panic carried was obeyed: snoozed for an hour, or dead.
func TestPanicThroughWrappingMiddleware(t *testing.T) {
	t.Parallel()
	ctx, _, b, name, _ := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	var mu sync.Mutex
	outcome := map[string]bus.JobEventType{}
	wrap := func(next bus.Handler) bus.Handler {
		return func(ctx context.Context, c *bus.Call) error {
			if err := next(ctx, c); err != nil {
				return fmt.Errorf("middleware: %w", err)
			}
			return nil
		}
	}
	w, err := bus.NewWorker(b, bus.WorkerConfig{Queue: name, Logger: quiet, MaxAttempts: 3,
		Backoff: func(int64) time.Duration { return time.Millisecond }, Middleware: []bus.Middleware{wrap},
		OnEvent: func(e bus.JobEvent) {
			switch e.Type {
			case bus.JobRetried, bus.JobDead, bus.JobSnoozed, bus.JobRateLimited:
				mu.Lock()
				if _, seen := outcome[e.Job.ID.String()]; !seen {
					outcome[e.Job.ID.String()] = e.Type
				}
				mu.Unlock()
			}
		}})
	require.NoError(t, err)
	bus.MustHandle(w, "panics", func(_ context.Context, task *bus.Task[args]) error {
		if task.Job.Token == 1 {
			switch task.Args.Mode {
			case "skip":
				panic(bus.SkipRetry(errors.New("poison")))
			case "snooze":
				panic(bus.Snooze(time.Hour))
			case "ratelimited":
				panic(bus.RateLimited(time.Hour))
			}
		}
		return nil
	}, nil)
	require.NoError(t, w.Start())
	defer func() { require.NoError(t, w.Close(ctx)) }()
	for _, mode := range []string{"skip", "snooze", "ratelimited"} {
		_, err := bus.EnqueueTask(ctx, b, name, "panics", args{Mode: mode}, nil)
		require.NoError(t, err)
	}
	valkeytest.Eventually(t, 10*time.Second, "a first outcome for each job", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(outcome) == 3
	})
	mu.Lock()
	defer mu.Unlock()
	for id, typ := range outcome {
		require.Equal(t, bus.JobRetried, typ, "job %s: a panic is a failure, retried", id)
	}
}

// TestNilSnoozeInChain: a nil *SnoozeError in a handler's error chain, behind a wrapper whose
// Error does not call it, snoozes for no time. The loop read its Delay and crashed the
// process (a nil dereference on the loop goroutine, which recovers nothing).
func TestNilSnoozeInChain(t *testing.T) {
	t.Parallel()
	ctx, _, b, name, _ := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	snoozed := make(chan struct{}, 1)
	w, err := bus.NewWorker(b, bus.WorkerConfig{Queue: name, Logger: quiet, OnEvent: func(e bus.JobEvent) {
		if e.Type == bus.JobSnoozed {
			select {
			case snoozed <- struct{}{}:
			default:
			}
		}
	}})
	require.NoError(t, err)
	bus.MustHandle(w, "nil", func(_ context.Context, task *bus.Task[args]) error {
		if task.Job.Token == 1 {
			return opaque{(*bus.SnoozeError)(nil)}
		}
		return nil
	}, nil)
	require.NoError(t, w.Start())
	defer func() { require.NoError(t, w.Close(ctx)) }()
	_, err = bus.EnqueueTask(ctx, b, name, "nil", args{}, nil)
	require.NoError(t, err)
	select {
	case <-snoozed:
	case <-time.After(10 * time.Second):
		t.Fatal("not snoozed")
	}
	valkeytest.Eventually(t, 10*time.Second, "the job to run again and complete", func() bool { return w.Stats().Completed == 1 })
}

// opaque wraps an error without calling it in Error.
type opaque struct{ err error }

func (o opaque) Error() string { return "opaque" }
func (o opaque) Unwrap() error { return o.err }

// TestWorkerMaxAttemptsUnlimited: math.MaxInt as a worker's or a kind's MaxAttempts (the
// "unlimited" that Config and Bus.Fail clamp) fails the job into its backoff as any maximum
// does. It went to the fail script as 19 digits, refused (EMQARGS) on every failure: the job
// stayed active until its lease ran out, its error lost, and ran again.
func TestWorkerMaxAttemptsUnlimited(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		worker, h int
	}{{"WorkerConfig", math.MaxInt, 0}, {"HandlerOpts", 0, math.MaxInt}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, _, b, name, _ := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
			startWorker(t, b, bus.WorkerConfig{Queue: name, MaxAttempts: tc.worker, Lease: time.Minute, Logger: quiet}, func(w *bus.Worker) {
				bus.MustHandle(w, "boom", func(context.Context, *bus.Task[args]) error { return errors.New("boom") },
					&bus.HandlerOpts{MaxAttempts: tc.h, Backoff: func(int64) time.Duration { return time.Hour }})
			})
			ids := enqueueTasks(t, b, name, "boom", 1, "")
			valkeytest.Eventually(t, 10*time.Second, "the failed job scheduled for its backoff", func() bool {
				c, err := b.Counts(ctx, name)
				return err == nil && c.Scheduled == 1
			})
			info, err := b.Lookup(ctx, name, ids[0])
			require.NoError(t, err)
			require.Len(t, info.Failures, 1)
			require.Contains(t, info.Failures[0].Error, "boom")
		})
	}
}
