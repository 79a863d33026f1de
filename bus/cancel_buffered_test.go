package bus_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// TestWorkerCancelBuffered: a worker with one slot and a prefetch buffer of 3 holds 4 jobs,
// one running and three leased in its buffer. Two of the buffered jobs are cancelled: the next
// heartbeat finds them cancelled, and they go to dead (failure "cancelled") without their
// handler ever running, while the running handler is untouched. Once it is released, the
// remaining buffered job runs; every job was claimed once. The published stats carry the
// cancels.
func TestWorkerCancelBuffered(t *testing.T) {
	t.Parallel()
	ctx, c, b, name, q := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	var (
		mu     sync.Mutex
		ran    []keys.JobID // the jobs whose handler ran, in order
		events []bus.JobEvent
	)
	started := make(chan struct{}, 4)
	release := make(chan struct{})
	cfg := bus.WorkerConfig{
		Queue: name, Concurrency: 1, Prefetch: 3, Lease: 2 * time.Second, HeartbeatInterval: 50 * time.Millisecond,
		StatsInterval: 20 * time.Millisecond,
		OnEvent: func(e bus.JobEvent) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		},
	}
	w := startWorker(t, b, cfg, func(w *bus.Worker) {
		bus.MustHandle(w, "block", func(ctx context.Context, task *bus.Task[args]) error {
			mu.Lock()
			ran = append(ran, task.Job.ID)
			mu.Unlock()
			started <- struct{}{}
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}, nil)
	})
	ids := enqueueTasks(t, b, name, "block", 4, "")
	<-started
	valkeytest.Eventually(t, 30*time.Second, "the worker to hold 4 jobs", func() bool {
		cs, err := b.Counts(ctx, name)
		require.NoError(t, err)
		return cs.Active == 4
	})
	mu.Lock()
	running := ran[0]
	mu.Unlock()
	var buffered []keys.JobID
	for _, id := range ids {
		if id != running {
			buffered = append(buffered, id)
		}
	}
	cancelled, kept := buffered[:2], buffered[2]
	for _, id := range cancelled {
		state, err := b.Cancel(ctx, name, id)
		require.NoError(t, err)
		require.Equal(t, bus.StateActive, state, "a buffered job is claimed: cancelled in place")
	}
	valkeytest.Eventually(t, 30*time.Second, "the cancelled jobs to be dead", func() bool {
		s := w.Stats()
		return s.Cancelled == 2 && s.Dead == 2
	})
	for _, id := range cancelled {
		info, err := b.Lookup(ctx, name, id)
		require.NoError(t, err)
		require.Equal(t, bus.StateDead, info.State)
		require.Equal(t, int64(1), info.Attempts)
		require.Equal(t, []bus.Failure{{Attempt: 1, At: info.Failures[0].At, Error: "cancelled"}}, info.Failures)
		require.Len(t, row(t, c, q, id), 3, "the row stays three fields")
	}
	mu.Lock()
	require.Equal(t, []keys.JobID{running}, ran, "only the running job's handler ran")
	mu.Unlock()
	valkeytest.Eventually(t, 10*time.Second, "the published stats to count the cancels", func() bool {
		fs := fleet(t, b, name)
		return len(fs.Workers) == 1 && fs.Total.Cancelled == 2 && fs.Total.Dead == 2
	})

	close(release)
	drained(t, b, name, 30*time.Second)
	valkeytest.Eventually(t, 10*time.Second, "the two others to be completed", func() bool { return w.Stats().Completed == 2 })
	s := w.Stats()
	require.Equal(t, int64(4), s.Claimed, "nothing was claimed twice")
	require.Zero(t, s.Retried)
	require.Zero(t, s.LeaseLost)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []keys.JobID{running, kept}, ran)
	for _, id := range cancelled {
		var got []string
		for _, e := range events {
			if e.Job.ID == id && e.Type != bus.JobExtended {
				got = append(got, e.Type.String())
				if e.Type == bus.JobDead {
					require.True(t, errors.Is(e.Err, bus.ErrCancelled), "the dead event names the cancel: %v", e.Err)
				}
			}
		}
		require.Equal(t, []string{"claimed", "cancelled", "dead"}, got, "job %s", id)
	}
}
