package bus_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
)

// TestWorkerHeartbeat: a 1 s handler on a 200 ms lease completes with token 1: the heartbeat
// timer's batched extends kept the lease alive while an outside reaper ran every 10 ms (the
// worker's own housekeeping is off, so only the heartbeat renews the lease). It does not call
// t.Parallel: the 200 ms lease is what the test is about, and the crash tests' worker
// processes, which run in parallel, load the machine enough to stall a loop that long.
func TestWorkerHeartbeat(t *testing.T) {
	ctx, c, b, name, q := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	tokens := make(chan int64, 4)
	var extended atomic.Int64
	w := startWorker(t, b, bus.WorkerConfig{Queue: name, Lease: 200 * time.Millisecond, HousekeepInterval: -1,
		OnEvent: func(e bus.JobEvent) {
			if e.Type == bus.JobExtended {
				extended.Add(1)
			}
		}}, func(w *bus.Worker) {
		bus.MustHandle(w, "long", func(ctx context.Context, task *bus.Task[args]) error {
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
				return context.Cause(ctx)
			}
			tokens <- task.Job.Token
			return nil
		}, nil)
	})
	reaped := make(chan int, 1)
	stopReaper := make(chan struct{})
	go func() {
		n := 0
		defer func() { reaped <- n }()
		for {
			select {
			case <-stopReaper:
				return
			case <-time.After(10 * time.Millisecond):
			}
			r, err := b.Reap(ctx, name, nil)
			if err == nil {
				n += len(r.Requeued) + len(r.Dead)
			}
		}
	}()
	e, err := bus.EnqueueTask(ctx, b, name, "long", args{}, nil)
	require.NoError(t, err)
	select {
	case tok := <-tokens:
		require.Equal(t, int64(1), tok, "the lease never lapsed")
	case <-time.After(30 * time.Second):
		t.Fatal("the handler did not finish")
	}
	close(stopReaper)
	require.Zero(t, <-reaped, "the outside reaper found no expired lease")
	valkeytest.Eventually(t, 10*time.Second, "the complete", func() bool { return w.Stats().Completed == 1 })
	s := w.Stats()
	require.Equal(t, int64(1), s.Claimed)
	require.Zero(t, s.LeaseLost)
	require.Zero(t, s.Stale)
	require.GreaterOrEqual(t, extended.Load(), int64(5), "about one extend per 67 ms over 1 s")
	t.Logf("%d extends over the 1 s handler", extended.Load())
	require.Empty(t, row(t, c, q, e.ID))
}

// TestWorkerLeaseLost: when a job is reaped from under its handler, the next heartbeat's
// extend answers EMQSTALE and the handler's context is cancelled with ErrLeaseLost; the job
// runs again under a new token.
func TestWorkerLeaseLost(t *testing.T) {
	t.Parallel()
	ctx, c, b, name, q := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	started := make(chan struct{}, 1)
	causes := make(chan error, 1)
	w := startWorker(t, b, bus.WorkerConfig{Queue: name, Lease: 200 * time.Millisecond, HousekeepInterval: -1}, func(w *bus.Worker) {
		bus.MustHandle(w, "held", func(ctx context.Context, task *bus.Task[args]) error {
			if task.Job.Token > 1 {
				return nil
			}
			started <- struct{}{}
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return ctx.Err()
		}, nil)
	})
	e, err := bus.EnqueueTask(ctx, b, name, "held", args{}, nil)
	require.NoError(t, err)
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the handler did not start")
	}
	// Expire the lease in the server's own index and reap it, as a reaper would after a
	// missed heartbeat. The heartbeat may renew the deadline between the two: try again.
	valkeytest.Eventually(t, 10*time.Second, "the job to be reaped", func() bool {
		require.NoError(t, c.Do(ctx, c.B().Zadd().Key(q.Active()).Xx().ScoreMember().ScoreMember(0, e.ID.String()).Build()).Error())
		r, err := b.Reap(ctx, name, nil)
		require.NoError(t, err)
		return len(r.Requeued) == 1
	})
	select {
	case cause := <-causes:
		require.ErrorIs(t, cause, bus.ErrLeaseLost)
	case <-time.After(30 * time.Second):
		t.Fatal("the handler's context was not cancelled")
	}
	valkeytest.Eventually(t, 10*time.Second, "the second run to complete", func() bool { return w.Stats().Completed == 1 })
	s := w.Stats()
	require.Equal(t, int64(1), s.LeaseLost)
	require.Equal(t, int64(2), s.Claimed)
	require.Zero(t, s.Stale, "the lost job's outcome is not sent")
	require.Empty(t, row(t, c, q, e.ID))
}

// TestWorkerTimeout: a handler's timeout cancels its context (cause ErrJobTimeout) however
// long heartbeats would keep the lease, and the job is retried.
func TestWorkerTimeout(t *testing.T) {
	t.Parallel()
	ctx, _, b, name, _ := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	causes := make(chan error, 4)
	w := startWorker(t, b, bus.WorkerConfig{Queue: name, Lease: time.Minute, MaxAttempts: 2, Backoff: func(int64) time.Duration { return 0 }}, func(w *bus.Worker) {
		bus.MustHandle(w, "stuck", func(ctx context.Context, task *bus.Task[args]) error {
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return ctx.Err()
		}, &bus.HandlerOpts{Timeout: 100 * time.Millisecond})
	})
	_, err := bus.EnqueueTask(ctx, b, name, "stuck", args{}, nil)
	require.NoError(t, err)
	for range 2 {
		select {
		case cause := <-causes:
			require.ErrorIs(t, cause, bus.ErrJobTimeout)
		case <-time.After(30 * time.Second):
			t.Fatal("the timeout did not cancel the handler")
		}
	}
	counts := drained(t, b, name, 10*time.Second)
	require.Equal(t, int64(1), counts.Dead, "two attempts, then dead")
	valkeytest.Eventually(t, 10*time.Second, "the counters", func() bool { s := w.Stats(); return s.Retried == 1 && s.Dead == 1 })
}
