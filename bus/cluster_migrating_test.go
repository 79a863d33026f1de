package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// TestEnqueueWhileSlotMigrates: an enqueue to a busy queue (its declared keys all exist on the
// source) while the queue's slot migrates is resent until the migration ends, as one refused
// with TRYAGAIN is. The script runs on the source and is refused its first new job row, which
// the source does not hold (a "non local key": an ASK raised inside the script, before any
// write); that error was returned at once, so producers failed for every migration of their
// queue's slot. Plain and lane enqueues.
func TestEnqueueWhileSlotMigrates(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a dedicated cluster")
	}
	t.Parallel()
	ctx := context.Background()
	cl := valkeytest.StartCluster(t)
	b, err := bus.New(cl.Client(t), bus.Config{})
	require.NoError(t, err)
	for _, lane := range []string{"", "tenant-a"} {
		q := valkeytest.TestName(t) + "-" + lane
		// A queue in use: meta, schedule, pending, wake (and the lane keys) exist.
		require.NoError(t, b.SetMaxAttempts(ctx, q, 5))
		_, err = b.Enqueue(ctx, q, []byte("later"), &bus.EnqueueOpts{Delay: time.Hour, Lane: lane})
		require.NoError(t, err)
		for range 3 {
			_, err = b.Enqueue(ctx, q, []byte("x"), &bus.EnqueueOpts{Lane: lane})
			require.NoError(t, err)
		}
		slot := keys.Slot(keys.MustQueue(q).Pending())
		to := cl.OtherPrimary(slot)
		_, err := cl.BeginMigration(ctx, slot, to)
		require.NoError(t, err)
		moved := make(chan error, 1)
		go func() {
			time.Sleep(time.Second) // shorter than the resend budget (about 4 s)
			moved <- cl.MigrateSlot(ctx, slot, to)
		}()
		_, err = b.Enqueue(ctx, q, []byte("during"), &bus.EnqueueOpts{Lane: lane})
		require.NoError(t, <-moved)
		require.NoError(t, err, "lane %q: an enqueue refused before any write is resent until the migration ends", lane)
		c, err := b.Counts(ctx, q)
		require.NoError(t, err)
		require.EqualValues(t, 4, c.Pending, "lane %q", lane)
	}
}
