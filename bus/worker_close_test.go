package bus_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// The Close tests do not call t.Parallel: goleak compares the goroutines of the whole
// process, so they run while no parallel test does (parallel tests are released only after
// every sequential one has finished). Each uses a client of its own, closed before the check.

// completions counts JobCompleted events per job id across workers.
type completions struct {
	mu sync.Mutex
	n  map[keys.JobID]int
}

func (c *completions) hook(e bus.JobEvent) {
	if e.Type != bus.JobCompleted {
		return
	}
	c.mu.Lock()
	c.n[e.Job.ID]++
	c.mu.Unlock()
}

// check asserts that every id completed exactly once.
func (c *completions) check(t *testing.T, ids []keys.JobID) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	require.Len(t, c.n, len(ids))
	for _, id := range ids {
		require.Equal(t, 1, c.n[id], "job %s", id)
	}
}

// TestWorkerCloseUnderLoad: Close while 8 handlers run returns when they have finished and
// their outcomes are sent, leaves no goroutine behind, and loses no job: the rest is
// pending, and a second worker completes it.
func TestWorkerCloseUnderLoad(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	c, err := newPlainClient(valkeytest.Shared(t).Addr)
	require.NoError(t, err)
	defer c.Close()
	b := newBus(t, c, bus.Config{})
	name := valkeytest.TestName(t)
	ids := enqueueTasks(t, b, name, "work", 300, "")
	done := &completions{n: map[keys.JobID]int{}}
	newW := func() *bus.Worker {
		w, err := bus.NewWorker(b, bus.WorkerConfig{Queue: name, Concurrency: 8, Logger: quiet, OnEvent: done.hook})
		require.NoError(t, err)
		bus.MustHandle(w, "work", func(ctx context.Context, task *bus.Task[args]) error {
			time.Sleep(time.Duration(rand.N(5)) * time.Millisecond)
			return nil
		}, nil)
		require.NoError(t, w.Start())
		return w
	}
	w := newW()
	valkeytest.Eventually(t, 30*time.Second, "50 completions", func() bool { return w.Stats().Completed >= 50 })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, w.Close(ctx))
	s := w.Stats()
	require.Zero(t, s.Running)
	require.Zero(t, s.HandedBack)
	require.Equal(t, s.Claimed, s.Completed, "every claimed job finished before Close returned")
	counts, err := b.Counts(ctx, name)
	require.NoError(t, err)
	require.Equal(t, bus.Counts{Pending: 300 - s.Completed}, counts)

	w2 := newW()
	drained(t, b, name, time.Minute)
	require.NoError(t, w2.Close(ctx))
	done.check(t, ids)
	c.Close()
}

// TestWorkerCloseDeadline: handlers that outlast Close's deadline are cancelled (cause
// ErrWorkerClosed); their jobs are handed back to pending without counting a failure, Close
// returns the deadline's error once every goroutine has ended, and nothing leaks.
func TestWorkerCloseDeadline(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	c, err := newPlainClient(valkeytest.Shared(t).Addr)
	require.NoError(t, err)
	defer c.Close()
	b := newBus(t, c, bus.Config{})
	name := valkeytest.TestName(t)
	ids := enqueueTasks(t, b, name, "block", 20, "")
	causes := make(chan error, 20)
	w, err := bus.NewWorker(b, bus.WorkerConfig{Queue: name, Concurrency: 8, Logger: quiet})
	require.NoError(t, err)
	bus.MustHandle(w, "block", func(ctx context.Context, task *bus.Task[args]) error {
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return ctx.Err()
	}, nil)
	require.NoError(t, w.Start())
	valkeytest.Eventually(t, 30*time.Second, "8 running handlers", func() bool { return w.Stats().Running == 8 })

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, w.Close(ctx), context.DeadlineExceeded)
	close(causes)
	n := 0
	for cause := range causes {
		require.ErrorIs(t, cause, bus.ErrWorkerClosed)
		n++
	}
	require.Equal(t, 8, n)
	s := w.Stats()
	require.Equal(t, int64(8), s.HandedBack)
	require.Zero(t, s.Failed)
	require.Zero(t, s.Running)
	counts, err := b.Counts(context.Background(), name)
	require.NoError(t, err)
	require.Equal(t, bus.Counts{Pending: 20}, counts, "every job is pending again, none lost")
	for _, id := range ids {
		info, err := b.Lookup(context.Background(), name, id)
		require.NoError(t, err)
		require.LessOrEqual(t, info.Attempts, int64(1))
	}
	c.Close()
}

// TestWorkerCloseServerStopped: when the server stops answering (SIGSTOP), Close still
// returns soon after its deadline: the round trip in flight is cut, the hand-backs share one
// short bound, and the jobs are left to their leases, which another worker reaps and
// completes once the server answers again. No job is lost.
func TestWorkerCloseServerStopped(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Start(t)
	b := newBus(t, srv.Client(t), bus.Config{})
	name := valkeytest.TestName(t)
	ids := enqueueTasks(t, b, name, "block", 8, "")
	done := &completions{n: map[keys.JobID]int{}}
	w, err := bus.NewWorker(b, bus.WorkerConfig{Queue: name, Concurrency: 4, Lease: time.Second, Logger: quiet, OnEvent: done.hook})
	require.NoError(t, err)
	bus.MustHandle(w, "block", func(ctx context.Context, task *bus.Task[args]) error {
		<-ctx.Done()
		return ctx.Err()
	}, nil)
	require.NoError(t, w.Start())
	valkeytest.Eventually(t, 30*time.Second, "4 running handlers", func() bool { return w.Stats().Running == 4 })

	require.NoError(t, srv.Stop())
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	began := time.Now()
	require.ErrorIs(t, w.Close(ctx), context.DeadlineExceeded)
	took := time.Since(began)
	require.NoError(t, srv.Continue())
	t.Logf("Close returned %v after it began, the server stopped", took)
	// The deadline (200 ms) and ONE hand-back bound (2 s) for every round trip after it:
	// handlers that return one after the other once the deadline passed do not each add one.
	require.Less(t, took, 4*time.Second, "bounded by the deadline and the hand-back bound, not the round-trip timeout")
	require.Zero(t, w.Stats().Running)

	w2 := startWorker(t, b, bus.WorkerConfig{Queue: name, Lease: time.Second, HousekeepInterval: 100 * time.Millisecond, OnEvent: done.hook}, func(w *bus.Worker) {
		bus.MustHandle(w, "block", func(ctx context.Context, task *bus.Task[args]) error { return nil }, nil)
	})
	drained(t, b, name, time.Minute)
	valkeytest.Eventually(t, 10*time.Second, "8 completions", func() bool { return w2.Stats().Completed+w.Stats().Completed == 8 })
	done.check(t, ids)
}
