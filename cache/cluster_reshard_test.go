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

// TestClusterReshard: the table's slot is migrated to another primary (MigrateSlot), then
// failed over to its replica, during writes in one cache and reads in another. No read is
// staler than one reconcile interval; after each change the reader's subscription follows
// the table's channel to the new owner (the server ends a sharded subscription whose slot
// moved; the topic resubscribes), so invalidations arrive again, not only reconciles; writes
// succeed again on the new owner.
func TestClusterReshard(t *testing.T) {
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
	a, err := cache.NewTable(ca, tables.Spec{Name: table, DegradedLoads: tables.Off}, load, nil)
	require.NoError(t, err)
	b, err := cache.NewTable(cb, tables.Spec{Name: table, DegradedLoads: tables.Off}, load, nil)
	require.NoError(t, err)

	h := newHistory()
	var stale, reads, worst, writes, writeErrs atomic.Int64
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
	wg.Go(func() {
		for i := 0; !stop.Load(); i++ {
			id := strconv.Itoa(i % 10)
			v := i/10 + 1
			if a.Set(ctx, id, v) == nil {
				h.wrote(id, v, time.Now())
				writes.Add(1)
			} else {
				writeErrs.Add(1)
			}
			time.Sleep(2 * time.Millisecond)
		}
	})
	valkeytest.Eventually(t, 30*time.Second, "some writes", func() bool { return writes.Load() > 50 })
	slot := keys.Slot(keys.MustTable(table).Record())
	from, to := cl.PrimaryForSlot(slot), cl.OtherPrimary(slot)
	phase := func(what string, fault func(context.Context) error) {
		t.Helper()
		fctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		start := time.Now()
		staleBefore := stale.Load()
		require.NoError(t, fault(fctx), what)
		took := time.Since(start)
		afterWrites, afterRecv := writes.Load(), b.Stats().InvalidationsReceived
		valkeytest.Eventually(t, 30*time.Second, "writes after: "+what, func() bool { return writes.Load() > afterWrites+200 })
		valkeytest.Eventually(t, 30*time.Second, "invalidations received after: "+what, func() bool {
			return b.Stats().InvalidationsReceived > afterRecv+100
		})
		t.Logf("%s: %v; then %d invalidations received; reads staler than the bound so far: %d (this phase %d)",
			what, took.Round(time.Millisecond), b.Stats().InvalidationsReceived-afterRecv, stale.Load(), stale.Load()-staleBefore)
	}
	phase("slot migrated to another primary", func(ctx context.Context) error { return cl.MigrateSlot(ctx, slot, to) })
	v, err := from.Do(ctx, "CLUSTER", "COUNTKEYSINSLOT", strconv.Itoa(int(slot)))
	require.NoError(t, err)
	require.Equal(t, "0", v, "every key of the table's slot left the old owner")
	phase("graceful failover", func(ctx context.Context) error { return cl.Failover(ctx, slot) })
	stop.Store(true)
	wg.Wait()
	t.Logf("%d writes (%d refused, during the faults), %d reads, worst staleness %v (bound %v + %v slack), flushes %d, gaps %d",
		writes.Load(), writeErrs.Load(), reads.Load(), time.Duration(worst.Load()), interval, slack, b.Stats().Flushes, b.Stats().Gaps)
	require.Zero(t, stale.Load(), "reads staler than one reconcile interval")
}
