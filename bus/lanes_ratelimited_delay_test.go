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

// TestLaneRateLimitedErrorBeyondMax: a handler that builds its own *RateLimitedError with a
// Delay longer than MaxRateLimited (a partner's Retry-After of two days) gets what
// RateLimited(d) promises: the job is handed back, its claim refunded, and its lane is held for
// MaxRateLimited. It is not refused by the script and left active until its lease runs out.
func TestLaneRateLimitedErrorBeyondMax(t *testing.T) {
	t.Parallel()
	ctx, c, b, name, _ := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	enqueueLaneTasks(t, b, name, "partner", "work", 1)
	limited := make(chan bus.JobEvent, 1)
	var stale atomic.Int64
	startWorker(t, b, bus.WorkerConfig{Queue: name, Concurrency: 1, Lease: time.Hour, OnEvent: func(e bus.JobEvent) {
		switch e.Type {
		case bus.JobRateLimited:
			limited <- e
		case bus.JobStale:
			stale.Add(1)
		}
	}}, func(w *bus.Worker) {
		bus.MustHandle(w, "work", func(context.Context, *bus.Task[args]) error {
			return &bus.RateLimitedError{Delay: 48 * time.Hour}
		}, nil)
	})
	var e bus.JobEvent
	select {
	case e = <-limited:
	case <-time.After(15 * time.Second):
		cs, err := b.Counts(ctx, name)
		require.NoError(t, err)
		t.Fatalf("no hand-back of the rate-limited job (counts %+v)", cs)
	}
	now := time.UnixMilli(serverMillis(t, c))
	require.WithinDuration(t, now.Add(bus.MaxRateLimited), e.At, time.Minute, "the lane is held for MaxRateLimited")
	info, err := b.Lookup(ctx, name, e.Job.ID)
	require.NoError(t, err)
	require.Equal(t, bus.StatePending, info.State)
	require.Equal(t, int64(1), info.Refunds)
	lane, err := b.Lane(ctx, name, "partner")
	require.NoError(t, err)
	require.WithinDuration(t, now.Add(bus.MaxRateLimited), lane.HeldUntil, time.Minute)
	require.Zero(t, stale.Load())
}
