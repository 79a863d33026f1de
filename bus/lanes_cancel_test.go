package bus_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
)

// TestLaneCancelRunning: a lane with a cap of 1 holds two jobs; the first one's handler runs
// until its context ends. Bus.Cancel of the running job ends that context with ErrCancelled,
// the job goes to dead with the failure "cancelled", and its slot is free: the lane's second
// job runs and completes, and the lane's count of claimed jobs is back to 0.
func TestLaneCancelRunning(t *testing.T) {
	t.Parallel()
	ctx, _, b, name, _ := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	require.NoError(t, b.SetLaneLimits(ctx, name, "a", bus.LaneLimits{Cap: 1}))
	first, err := bus.EnqueueTask(ctx, b, name, "work", args{N: 1}, &bus.TaskOpts{EnqueueOpts: bus.EnqueueOpts{Lane: "a"}})
	require.NoError(t, err)
	_, err = bus.EnqueueTask(ctx, b, name, "work", args{N: 2}, &bus.TaskOpts{EnqueueOpts: bus.EnqueueOpts{Lane: "a"}})
	require.NoError(t, err)
	var started, cancelled, second atomic.Bool
	startWorker(t, b, bus.WorkerConfig{Queue: name, Concurrency: 2, Lease: 3 * time.Second, HeartbeatInterval: 100 * time.Millisecond}, func(w *bus.Worker) {
		bus.MustHandle(w, "work", func(ctx context.Context, task *bus.Task[args]) error {
			if task.Args.N == 2 {
				second.Store(true)
				return nil
			}
			started.Store(true)
			<-ctx.Done()
			cancelled.Store(errors.Is(context.Cause(ctx), bus.ErrCancelled))
			return ctx.Err()
		}, nil)
	})
	valkeytest.Eventually(t, 10*time.Second, "the first job's handler to start", started.Load)
	time.Sleep(300 * time.Millisecond) // a few heartbeats: the cap holds the second job back
	require.False(t, second.Load(), "the lane's cap of 1 holds its second job while the first runs")
	state, err := b.Cancel(ctx, name, first.ID)
	require.NoError(t, err)
	require.Equal(t, bus.StateActive, state)
	valkeytest.Eventually(t, 10*time.Second, "the second job to run", second.Load)
	require.True(t, cancelled.Load(), "the handler's context ended with ErrCancelled")
	info, err := b.Lookup(ctx, name, first.ID)
	require.NoError(t, err)
	require.Equal(t, bus.StateDead, info.State)
	require.Equal(t, "a", info.Lane)
	require.Len(t, info.Failures, 1)
	require.Equal(t, "cancelled", info.Failures[0].Error)
	valkeytest.Eventually(t, 10*time.Second, "the second job's completion", func() bool {
		lane, err := b.Lane(ctx, name, "a")
		require.NoError(t, err)
		counts, err := b.Counts(ctx, name)
		require.NoError(t, err)
		return lane.Active == 0 && lane.Waiting == 0 && counts.Active == 0 && counts.Dead == 1 && counts.LanesActive == 0
	})
}
