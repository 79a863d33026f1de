package cache_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/tables"
)

// TestSequenceRegression: Valkey comes back from a snapshot older than the writes a reader
// saw (SAVE, 50 more writes, SIGKILL, restart from the snapshot), so the table's sequence
// goes back and the invalidations after the snapshot are lost. One more write later, no
// reader serves the pre-restart value past one reconcile interval: the regression is seen,
// the table flushed and its rows (back as the snapshot had them) invalidated. In "past the
// old sequence", 50 writes after the restore, whose messages the reader misses, bring the
// sequence back to where the reader was before the write that exceeds it: only the chained
// tokens tell. A second table that lost nothing to the restore is not flushed.
func TestSequenceRegression(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts dedicated servers")
	}
	t.Parallel()
	const interval = 500 * time.Millisecond
	for _, tc := range []struct {
		name  string
		after int // writes after the restore that the reader misses, before the last one
	}{
		{"restore", 0},
		{"past the old sequence", 50},
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
			// Set is the truth here, not the loader (which answers 0): degraded mode is off.
			load := func(context.Context, string) (int, error) { return 0, nil }
			mk := func(c *cache.Cache, name string) *cache.Table[string, int] {
				tbl, err := cache.NewTable(c, tables.Spec{Name: name, DegradedLoads: tables.Off}, load, nil)
				require.NoError(t, err)
				return tbl
			}
			a1, b1, a2, b2 := mk(ca, lossy), mk(cb, lossy), mk(ca, whole), mk(cb, whole)
			inL1 := func(tbl *cache.Table[string, int], id string, want int) func() bool {
				return func() bool {
					v, err := tbl.Get(ctx, id)
					got, ok := cache.PeekL1(tbl, id)
					return err == nil && v == want && ok && got == want
				}
			}

			require.NoError(t, a1.Set(ctx, "k", 1))
			require.NoError(t, a2.Set(ctx, "j", 1))
			// Every message first: one arriving after the read would drop what it installed.
			valkeytest.Eventually(t, 10*time.Second, "b2 to receive j", func() bool { return b2.Stats().InvalidationsReceived == 1 })
			valkeytest.Eventually(t, 10*time.Second, "b2 to hold j", inL1(b2, "j", 1))
			require.NoError(t, srv.Client(t).Do(ctx, srv.Client(t).B().Save().Build()).Error())
			for v := 2; v <= 51; v++ {
				require.NoError(t, a1.Set(ctx, "k", v))
			}
			valkeytest.Eventually(t, 10*time.Second, "b1 to receive 51 writes", func() bool { return b1.Stats().InvalidationsReceived == 51 })
			valkeytest.Eventually(t, 10*time.Second, "b1 to hold the last pre-restart value", inL1(b1, "k", 51))
			flushes2 := b2.Stats().Flushes

			require.NoError(t, srv.Kill())
			require.NoError(t, srv.Restart())
			dropping.Store(tc.after > 0)
			for i := range tc.after {
				valkeytest.Eventually(t, 30*time.Second, "a write after the restore", func() bool { return a1.Set(ctx, "x", i) == nil })
			}
			dropping.Store(false)
			var done time.Time
			valkeytest.Eventually(t, 30*time.Second, "the write after the restore", func() bool {
				err := a1.Set(ctx, "x", 999)
				done = time.Now()
				return err == nil
			})
			for {
				start := time.Now()
				v, err := b1.Get(ctx, "k")
				if err == nil && v != 51 {
					t.Logf("b1 stopped serving the pre-restart value %v after the write (bound %v): regressions %d, gaps %d, flushes %d",
						start.Sub(done), interval, b1.Stats().Regressions, b1.Stats().Gaps, b1.Stats().Flushes)
					// The row as the snapshot had it, or the loader's once the table's rows
					// were invalidated after the regression.
					require.Contains(t, []int{0, 1}, v)
					break
				}
				require.False(t, start.After(done.Add(interval+slack)), "b1 still serves %d (%v) %v after the write", v, err, start.Sub(done))
				time.Sleep(5 * time.Millisecond)
			}
			require.Positive(t, b1.Stats().Flushes)
			valkeytest.Eventually(t, 10*time.Second, "the rolled-back row invalidated", func() bool {
				v, err := b1.Get(ctx, "k")
				return err == nil && v == 0
			})

			// The table that lost nothing keeps its L1 through reconciles after the restart.
			r2 := b2.Stats().Reconciles
			valkeytest.Eventually(t, 10*time.Second, "two reconciles of the whole table", func() bool { return b2.Stats().Reconciles >= r2+2 })
			require.Equal(t, flushes2, b2.Stats().Flushes, "no flush where nothing was lost")
			require.Zero(t, b2.Stats().Regressions)
			got, ok := cache.PeekL1(b2, "j")
			require.True(t, ok)
			require.Equal(t, 1, got)
		})
	}
}
