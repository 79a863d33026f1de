package bus_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// TestCancelledThenSnoozedGoesDead: a job cancelled while its handler runs, whose handler
// returns a Snooze before a heartbeat saw the cancel. snooze refuses a cancelling job ("not
// active"); the worker then fails it with the same token, which sends it to dead (FORMAT
// cancel), instead of counting it stale and leaving it in active until its lease runs out.
func TestCancelledThenSnoozedGoesDead(t *testing.T) {
	ctx, _, b, name, _ := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	var id atomic.Value
	w := startWorker(t, b, bus.WorkerConfig{Queue: name, Lease: 20 * time.Second, HousekeepInterval: -1, StatsInterval: -1}, func(w *bus.Worker) {
		bus.MustHandle(w, "nap", func(ctx context.Context, task *bus.Task[args]) error {
			id.Store(task.Job.ID)
			if _, err := b.Cancel(ctx, name, task.Job.ID); err != nil {
				return err
			}
			return bus.Snooze(0)
		}, nil)
	})
	_, err := bus.EnqueueTask(ctx, b, name, "nap", args{}, nil)
	require.NoError(t, err)
	valkeytest.Eventually(t, 10*time.Second, "the handler's outcome", func() bool {
		s := w.Stats()
		return s.Stale+s.Dead+s.Snoozed > 0
	})
	time.Sleep(300 * time.Millisecond)
	info, err := b.Lookup(ctx, name, id.Load().(keys.JobID))
	require.NoError(t, err)
	t.Logf("stats %+v; job state %s in set %v", w.Stats(), info.State, info.Set)
	require.Zero(t, w.Stats().Stale, "the job was this worker's: not stale")
	require.Equal(t, bus.StateDead, info.State, "the holder fails a cancelled job it cannot snooze")
}
