package cache_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/tables"
)

// TestClusterFailover: a failover of the primary that owns the table's slot, during writes
// and reads in two caches: no read is staler than one reconcile interval.
func TestClusterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a dedicated cluster")
	}
	t.Parallel()
	const interval = 300 * time.Millisecond
	ctx := context.Background()
	cl := valkeytest.StartCluster(t)
	table := tableName(t)
	cfg := cache.Config{ReconcileInterval: interval}
	load := func(context.Context, string) (int, error) { return 0, nil }
	ca, err := cache.New(cl.Client(t), cfg)
	require.NoError(t, err)
	t.Cleanup(ca.Close)
	cb, err := cache.New(cl.Client(t), cfg)
	require.NoError(t, err)
	t.Cleanup(cb.Close)
	// Set is the truth here, not the loader: degraded mode, which serves the loader while L2
	// fails, is off.
	spec := tables.Spec{Name: table, DegradedLoads: tables.Off}
	a, err := cache.NewTable(ca, spec, load, nil)
	require.NoError(t, err)
	b, err := cache.NewTable(cb, spec, load, nil)
	require.NoError(t, err)

	h := newHistory()
	var stale, reads atomic.Int64
	var worst atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; !stop.Load(); i++ {
			id := strconv.Itoa(i % 10)
			start := time.Now()
			v, err := b.Get(ctx, id)
			if err != nil {
				continue
			}
			reads.Add(1)
			if s := h.staleness(id, v, start); s > 0 {
				for m := worst.Load(); int64(s) > m && !worst.CompareAndSwap(m, int64(s)); m = worst.Load() {
				}
				if s > interval+slack {
					stale.Add(1)
				}
			}
			time.Sleep(time.Millisecond)
		}
	})
	var writes atomic.Int64
	wg.Go(func() {
		for i := 0; !stop.Load(); i++ {
			id := strconv.Itoa(i % 10)
			v := i/10 + 1
			if a.Set(ctx, id, v) == nil {
				h.wrote(id, v, time.Now())
				writes.Add(1)
			}
			time.Sleep(2 * time.Millisecond)
		}
	})
	valkeytest.Eventually(t, 30*time.Second, "some writes", func() bool { return writes.Load() > 50 })
	fctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	require.NoError(t, cl.Failover(fctx, keys.Slot(keys.MustTable(table).Record())))
	after := writes.Load()
	valkeytest.Eventually(t, 30*time.Second, "writes after the failover", func() bool { return writes.Load() > after+200 })
	stop.Store(true)
	wg.Wait()
	t.Logf("%d writes, %d reads, worst staleness %v (bound %v + %v slack), flushes %d, gaps %d",
		writes.Load(), reads.Load(), time.Duration(worst.Load()), interval, slack, b.Stats().Flushes, b.Stats().Gaps)
	require.Zero(t, stale.Load(), "reads staler than one reconcile interval")
}
