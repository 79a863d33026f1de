package bus_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
)

// nilDerefError is an error type whose methods read its fields: returned as a typed nil
// pointer, it is a non-nil error whose Error and Unwrap panic.
type nilDerefError struct {
	op  string
	err error
}

func (e *nilDerefError) Error() string { return e.op + ": " + e.err.Error() }
func (e *nilDerefError) Unwrap() error { return e.err }

// failing returns a typed nil *nilDerefError as an error: the classic non-nil nil.
func failing() error {
	var e *nilDerefError
	return e
}

// TestWorkerHandlerErrorPanics: a handler that returns an error whose Error and Unwrap panic
// (a typed nil pointer) fails its job like a panic would (a *PanicError), and the worker
// goes on: the retry runs and completes, and Close returns.
func TestWorkerHandlerErrorPanics(t *testing.T) {
	t.Parallel()
	ctx, _, b, name, _ := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	events := make(chan bus.JobEvent, 100)
	w := startWorker(t, b, bus.WorkerConfig{
		Queue: name, Concurrency: 1, Backoff: func(int64) time.Duration { return time.Millisecond },
		OnEvent: func(e bus.JobEvent) { events <- e },
	}, func(w *bus.Worker) {
		bus.MustHandle(w, "nilerr", func(ctx context.Context, task *bus.Task[args]) error {
			if task.Job.Token == 1 {
				return failing()
			}
			return nil
		}, nil)
	})
	_, err := bus.EnqueueTask(ctx, b, name, "nilerr", args{}, nil)
	require.NoError(t, err)
	var retried *bus.JobEvent
	for done := false; !done; {
		select {
		case e := <-events:
			switch e.Type {
			case bus.JobRetried:
				retried = &e
			case bus.JobCompleted:
				done = true
			case bus.JobDead:
				t.Fatalf("the job went to dead: %v", e.Err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the job did not complete")
		}
	}
	require.NotNil(t, retried, "the first attempt failed")
	var pe *bus.PanicError
	require.ErrorAs(t, retried.Err, &pe)
	s := w.Stats()
	require.Equal(t, int64(1), s.Retried)
	require.Equal(t, int64(1), s.Completed)
}

// TestWorkerHandlerGoexit: a handler that ends its goroutine with runtime.Goexit (as
// t.FailNow or a failed require does) fails its job instead of taking its slot for good: the
// worker of one slot runs the retry and the next job, and Close returns within its deadline.
func TestWorkerHandlerGoexit(t *testing.T) {
	t.Parallel()
	ctx, _, b, name, _ := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	cfg := bus.WorkerConfig{Queue: name, Concurrency: 1, Logger: quiet, Backoff: func(int64) time.Duration { return time.Millisecond }}
	w, err := bus.NewWorker(b, cfg)
	require.NoError(t, err)
	bus.MustHandle(w, "exits", func(ctx context.Context, task *bus.Task[args]) error {
		if task.Job.Token == 1 && task.Args.Mode == "exit" {
			runtime.Goexit()
		}
		return nil
	}, nil)
	require.NoError(t, w.Start())
	enqueueTasks(t, b, name, "exits", 1, "exit")
	enqueueTasks(t, b, name, "exits", 1, "")
	valkeytest.Eventually(t, 30*time.Second, "both jobs to complete", func() bool { return w.Stats().Completed == 2 })
	s := w.Stats()
	require.Equal(t, int64(1), s.Retried)
	require.Zero(t, s.Running)

	closed := make(chan error, 1)
	go func() {
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		closed <- w.Close(cctx)
	}()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("Close did not return: the handler that called runtime.Goexit is still counted as running")
	}
	counts, err := b.Counts(ctx, name)
	require.NoError(t, err)
	require.Equal(t, bus.Counts{}, counts)
}

// TestWorkerCloseEndedContext: Close with a context that has ended already (a shutdown
// signal's, say) on a busy worker. The round trips in flight are still answered, within the
// hand-back bound: the jobs their claims bring back are handed back, and their completes are
// counted. No job is left active to its lease, none is counted stale, and every job the
// worker claimed is completed or handed back. Several rounds, since what is in flight at the
// call varies.
func TestWorkerCloseEndedContext(t *testing.T) {
	t.Parallel()
	ctx, _, b, name, _ := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	const jobs = 2000
	for round := range 6 {
		queue := fmt.Sprintf("%s-%d", name, round)
		enqueueTasks(t, b, queue, "work", jobs, "")
		w, err := bus.NewWorker(b, bus.WorkerConfig{Queue: queue, Concurrency: 8, HousekeepInterval: -1, StatsInterval: -1, Logger: quiet})
		require.NoError(t, err)
		bus.MustHandle(w, "work", func(context.Context, *bus.Task[args]) error { return nil }, nil)
		require.NoError(t, w.Start())
		valkeytest.Eventually(t, 30*time.Second, "100 completions", func() bool { return w.Stats().Completed >= 100 })

		ended, cancel := context.WithCancel(ctx)
		cancel()
		require.ErrorIs(t, w.Close(ended), context.Canceled)
		counts, err := b.Counts(ctx, queue)
		require.NoError(t, err)
		s := w.Stats()
		require.Zero(t, counts.Active, "round %d: jobs left active to their leases (%+v)", round, s)
		require.Zero(t, s.Stale, "round %d: completes that went through counted stale (%+v)", round, s)
		require.Equal(t, s.Claimed, s.Completed+s.HandedBack, "round %d: %+v", round, s)
		require.Equal(t, int64(jobs), s.Completed+counts.Pending, "round %d: %+v, %+v", round, s, counts)
	}
}
