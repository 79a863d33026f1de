package cache_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
)

// TestSequenceRegression: Valkey comes back from a snapshot older than the writes a reader
// saw (SAVE, 50 more writes, SIGKILL, restart from the snapshot), so the table's sequence
// goes back and the invalidations after the snapshot are lost. One more write later, no
// reader serves the pre-restart value past one reconcile interval: the regression is seen,
// the table flushed and its rows (back as the snapshot had them) invalidated. In "past the
// old sequence", 50 writes after the restore, whose messages the reader misses, bring the
// sequence back to where the reader was before the write that exceeds it: only the chained
// tokens tell; and when the reader misses the last write's message too, the reconcile tells
// by the record's ring of recent tokens, which no longer passes through the point the reader
// saw. A second table that lost nothing to the restore is not flushed.
func TestSequenceRegression(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts dedicated servers")
	}
	t.Parallel()
	const interval = 500 * time.Millisecond
	for _, tc := range []struct {
		name     string
		after    int  // writes after the restore that the reader misses, before the last one
		lastLost bool // the reader misses the last one's message too: only a reconcile can tell
	}{
		{"restore", 0, false},
		{"past the old sequence", 50, false},
		{"past the old sequence, every message lost", 50, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			srv := valkeytest.Start(t, valkeytest.WithoutPersistence()) // SAVE makes the one snapshot
			cfg := cache.Config{ReconcileInterval: interval}
			ca, err := cache.New(srv.Client(t), cfg)
			require.NoError(t, err)
			t.Cleanup(ca.Close)
			cb, err := cache.New(srv.Client(t), cfg)
			require.NoError(t, err)
			t.Cleanup(cb.Close)
			lossy, whole := tableName(t), tableName(t)
			var dropping atomic.Bool
			cb.SetHookMessage(func(table string, _ []byte) bool { return table != lossy || !dropping.Load() })
			f := newRegressionFixture(t, ca, cb, lossy, whole, 0)
			a1, b1, b2 := f.a1, f.b1, f.b2
			f.seed(t)
			require.NoError(t, srv.Client(t).Do(ctx, srv.Client(t).B().Save().Build()).Error())
			f.writeUpTo51(t)
			flushes2 := b2.Stats().Flushes

			require.NoError(t, srv.Kill())
			require.NoError(t, srv.Restart())
			dropping.Store(tc.after > 0)
			for i := range tc.after {
				valkeytest.Eventually(t, 30*time.Second, "a write after the restore", func() bool { return a1.Set(ctx, "x", i) == nil })
			}
			dropping.Store(tc.lastLost)
			var done time.Time
			valkeytest.Eventually(t, 30*time.Second, "the write after the restore", func() bool {
				err := a1.Set(ctx, "x", 999)
				done = time.Now()
				return err == nil
			})
			dropping.Store(false)
			f.awaitForgotten(t, 51, done, interval, interval+slack)
			require.Positive(t, b1.Stats().Flushes)

			// The table that lost nothing keeps its L1 through reconciles after the restart.
			f.wholeKept(t, flushes2)
			got, ok := cache.PeekL1(b2, "j")
			require.True(t, ok)
			require.Equal(t, 1, got)
		})
	}
}
