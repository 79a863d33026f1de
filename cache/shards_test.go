package cache_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/tables"
)

// spanningName returns a table name, derived from the test's, whose 8 shards land on every
// primary of cl. Eight slots picked by CRC16 miss one of three primaries about one time in
// eight (3·(2/3)^8), so the test tries suffixes until keys.Slot says the shards span them, as
// an operator sizing a table would check.
func spanningName(t *testing.T, cl *valkeytest.Cluster, shards int) string {
	t.Helper()
	primaries := len(cl.Primaries())
	require.Equal(t, 3, primaries)
	base := tableName(t)
	for i := range 100 {
		name := base[:min(len(base), 60)] + "." + strconv.Itoa(i)
		owners := map[string]bool{}
		for s := range shards {
			sh, err := keys.MustTable(name).Shard(s)
			require.NoError(t, err)
			owners[cl.PrimaryForSlot(keys.Slot(sh.Record())).Addr] = true
		}
		if len(owners) == primaries {
			return name
		}
	}
	t.Fatal("no name in 100 whose shards span the primaries")
	return ""
}

// TestShardsOnCluster: a table of 8 shards on the 3-primary cluster has rows on every
// primary; Get and GetMany read them from another process's cache, Invalidate and
// InvalidateAll reach its L1 through every shard's channel, and a lost message on any shard
// is caught by the reconcile, which reads all 8 records.
func TestShardsOnCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cl := valkeytest.SharedCluster(t)
	const shards, n = 8, 200
	name := spanningName(t, cl, shards)
	var drop atomic64
	newSide := func() (*cache.Cache, *cache.Table[string, user], *source) {
		c, err := cache.New(cl.Client(t), cache.Config{ReconcileInterval: 300 * time.Millisecond})
		require.NoError(t, err)
		t.Cleanup(c.Close)
		c.SetHookMessage(func(_ string, payload []byte) bool { return drop.take() == 0 })
		src := &source{}
		tbl, err := cache.NewTable(c, tables.Spec{Name: name, Shards: shards, L2Timeout: relaxedL2, DegradedLoads: tables.Off}, src.load, nil)
		require.NoError(t, err)
		require.Equal(t, shards, tbl.Spec().Shards)
		return c, tbl, src
	}
	_, a, srcA := newSide()
	_, b, srcB := newSide()

	all := ids(0, n)
	for _, id := range all {
		_, err := a.Get(ctx, id)
		require.NoError(t, err)
	}
	require.Equal(t, int64(n), srcA.calls.Load())

	// Every row is in its shard's slot, and the shards' slots belong to every primary.
	client := cl.Client(t)
	perPrimary := map[string]int{}
	for _, id := range all {
		key := rowKey(t, a, id)
		k, err := keys.Parse(key)
		require.NoError(t, err)
		require.Equal(t, keys.ShardRow, k.Type)
		require.Equal(t, keys.ShardOf(id, shards), k.Shard)
		require.Equal(t, "value", cache.ParsedKind(readRaw(t, client, key)), id)
		owner := cl.PrimaryForSlot(keys.Slot(key))
		got, err := owner.Do(ctx, "EXISTS", key)
		require.NoError(t, err)
		require.Equal(t, "1", got, "%s is on the primary that owns its slot", key)
		perPrimary[owner.Addr]++
	}
	t.Logf("rows per primary: %v", perPrimary)
	require.Len(t, perPrimary, 3, "rows on every primary")
	unsharded, err := keys.MustTable(name).Row(all[0])
	require.NoError(t, err)
	require.Empty(t, readRaw(t, client, unsharded), "nothing in the unsharded layout")

	// Another process reads them: Get from L2, GetMany with one MGET per shard.
	v, tier, err := b.Lookup(ctx, all[0])
	require.NoError(t, err)
	require.Equal(t, cache.TierL2, tier)
	require.Equal(t, user{ID: all[0], Name: "name-" + all[0]}, v)
	many, err := b.GetMany(ctx, all)
	require.NoError(t, err)
	require.Len(t, many, n)
	require.Zero(t, srcB.calls.Load(), "every row came from L2")
	for _, id := range all {
		cached, ok := cache.PeekL1(b, id)
		require.True(t, ok, id)
		require.Equal(t, "name-"+id, cached.Name)
	}

	// Invalidate ids of every shard from a: b's L1 drops each, the rows are gone.
	victims := ids(0, 40)
	require.Equal(t, shards, shardsOf(victims, shards), "the victims span every shard")
	received := b.Stats().InvalidationsReceived
	require.NoError(t, a.Invalidate(ctx, victims...))
	valkeytest.Eventually(t, 10*time.Second, "b's L1 dropped every invalidated id", func() bool {
		for _, id := range victims {
			if _, ok := cache.PeekL1(b, id); ok {
				return false
			}
		}
		return true
	})
	require.GreaterOrEqual(t, b.Stats().InvalidationsReceived-received, int64(shards), "one message per shard")
	for _, id := range victims {
		require.Empty(t, readRaw(t, client, rowKey(t, a, id)), id)
	}
	_, ok := cache.PeekL1(b, all[n-1])
	require.True(t, ok, "ids not invalidated stay in b's L1")

	// A lost message, on whichever shard: the reconcile reads all 8 records and flushes.
	require.NoError(t, a.Set(ctx, all[n-1], user{ID: all[n-1], Name: "before"}))
	valkeytest.Eventually(t, 10*time.Second, "b dropped the Set id", func() bool { _, ok := cache.PeekL1(b, all[n-1]); return !ok })
	// b's L1 holds "before" (ristretto may refuse or delay an install: read until it holds
	// it), so only a reconcile can tell it is stale once the message is lost.
	valkeytest.Eventually(t, 10*time.Second, "b holds the id in L1", func() bool {
		if _, err := b.Get(ctx, all[n-1]); err != nil {
			return false
		}
		got, ok := cache.PeekL1(b, all[n-1])
		return ok && got.Name == "before"
	})
	reconciles := b.Stats().Reconciles
	drop.set(2) // a's and b's subscribers both lose the next message
	require.NoError(t, a.Set(ctx, all[n-1], user{ID: all[n-1], Name: "after"}))
	valkeytest.Eventually(t, 10*time.Second, "the reconcile caught the lost message", func() bool {
		got, err := b.Get(ctx, all[n-1])
		return err == nil && got.Name == "after"
	})
	require.GreaterOrEqual(t, b.Stats().Reconciles-reconciles, int64(shards), "a reconcile reads every shard's record")

	// InvalidateAll: every shard's rows are deleted and b's L1 is flushed.
	flushes := b.Stats().Flushes
	require.NoError(t, a.InvalidateAll(ctx))
	for _, id := range all {
		require.Empty(t, readRaw(t, client, rowKey(t, a, id)), id)
	}
	valkeytest.Eventually(t, 10*time.Second, "b's L1 flushed", func() bool {
		for _, id := range all[40:] {
			if _, ok := cache.PeekL1(b, id); ok {
				return false
			}
		}
		return true
	})
	require.Greater(t, b.Stats().Flushes, flushes)
	_, err = b.Get(ctx, all[50])
	require.NoError(t, err)
	require.Equal(t, int64(1), srcB.calls.Load(), "after InvalidateAll the next read loads")
}

// atomic64 counts messages still to drop.
type atomic64 struct{ n atomic.Int64 }

func (a *atomic64) set(k int64) { a.n.Store(k) }

// take counts one message off, and returns what was left before it (0: drop nothing).
func (a *atomic64) take() int64 {
	for {
		v := a.n.Load()
		if v <= 0 {
			return 0
		}
		if a.n.CompareAndSwap(v, v-1) {
			return v
		}
	}
}
