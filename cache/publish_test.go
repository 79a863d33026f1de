package cache_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
	"github.com/echocache/echocache/tables"
)

// listedTable is the registry's entry for name, if any.
func listedTable(t *testing.T, client valkey.Client, name string) (cache.TableInfo, bool) {
	t.Helper()
	all, err := cache.Tables(context.Background(), client)
	require.NoError(t, err)
	for i, ti := range all {
		if i > 0 {
			require.Less(t, all[i-1].Name, ti.Name, "Tables is sorted by name")
		}
		if ti.Name == name {
			return ti, true
		}
	}
	return cache.TableInfo{}, false
}

// TestTableRegistry: a declared table is listed, with the time it was first declared, and
// stays listed once its rows are gone; a second Cache keeps the first time (ZADD NX). On the
// cluster, tables whose slots live on each primary are all listed by one call.
func TestTableRegistry(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, client valkey.Client) {
		ctx := context.Background()
		name := tableName(t)
		_, ok := listedTable(t, client, name)
		require.False(t, ok)
		before := time.Now().Add(-time.Millisecond)
		tbl := newTable(t, newCache(t, client), tables.Spec{Name: name, L2Timeout: relaxedL2}, &source{})
		var first cache.TableInfo
		valkeytest.Eventually(t, 10*time.Second, "the table to be listed", func() bool {
			first, ok = listedTable(t, client, name)
			return ok
		})
		require.WithinRange(t, first.FirstSeen, before, time.Now())
		_, err := tbl.Get(ctx, "u1")
		require.NoError(t, err)
		require.NoError(t, tbl.InvalidateAll(ctx))
		require.Empty(t, readRaw(t, client, rowKey(t, tbl, "u1")))
		_, ok = listedTable(t, client, name)
		require.True(t, ok, "a table without rows stays listed")

		time.Sleep(2 * time.Millisecond)
		other := newTable(t, newCache(t, client), tables.Spec{Name: name, L2Timeout: relaxedL2}, &source{})
		require.NotNil(t, other)
		time.Sleep(50 * time.Millisecond) // the second Cache's ZADD NX, sent in the background
		again, _ := listedTable(t, client, name)
		require.Equal(t, first.FirstSeen, again.FirstSeen)
	})
}

func TestTableRegistryAcrossPrimaries(t *testing.T) {
	t.Parallel()
	cl := valkeytest.SharedCluster(t)
	client := cl.Client(t)
	c := newCache(t, client)
	var names []string
	for _, p := range cl.Primaries() {
		base := tableName(t)
		for i := 0; ; i++ {
			name := fmt.Sprintf("%s.%d", base[:min(len(base), 56)], i)
			if cl.PrimaryForSlot(keys.Slot(keys.MustTable(name).Record())) == p {
				names = append(names, name)
				newTable(t, c, tables.Spec{Name: name, L2Timeout: relaxedL2}, &source{})
				break
			}
		}
	}
	valkeytest.Eventually(t, 10*time.Second, "the tables of every primary to be listed", func() bool {
		for _, name := range names {
			if _, ok := listedTable(t, client, name); !ok {
				return false
			}
		}
		return true
	})
}

// TestTableStatsPublished: two caches of one table publish their stats under the table's
// hash tag, in a key no row id can name; a tool reads each cache's and their sums; Close
// withdraws a cache's snapshot; a whole-table invalidation keeps the stats.
func TestTableStatsPublished(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, client valkey.Client) {
		ctx := context.Background()
		name := tableName(t)
		open := func(id string) (*cache.Cache, *cache.Table[string, user]) {
			c, err := cache.New(client, cache.Config{ID: id, StatsInterval: 20 * time.Millisecond})
			require.NoError(t, err)
			t.Cleanup(c.Close)
			return c, newTable(t, c, tables.Spec{Name: name, L2Timeout: relaxedL2}, &source{})
		}
		c1, t1 := open("c1")
		_, t2 := open("c2")
		for _, id := range []string{"u1", "u2", "#stats", "stats"} {
			_, err := t1.Get(ctx, id) // misses: loads
			require.NoError(t, err)
			_, err = t1.Get(ctx, id) // L1
			require.NoError(t, err)
			_, err = t2.Get(ctx, id) // L2
			require.NoError(t, err)
		}
		require.NoError(t, t2.Set(ctx, "u1", user{ID: "u1", Name: "new"}))
		statsKey := keys.MustTable(name).Stats()
		for _, id := range []string{"#stats", "stats"} {
			require.NotEmpty(t, readRaw(t, client, rowKey(t, t1, id)), "the row %s is a row", id)
		}
		var fs cache.FleetStats
		valkeytest.Eventually(t, 10*time.Second, "both caches' counters to be published", func() bool {
			var err error
			fs, err = cache.ReadStats(ctx, client, name)
			require.NoError(t, err)
			s1, s2 := t1.Stats(), t2.Stats()
			return len(fs.Caches) == 2 && s1.InvalidationsReceived == 1 && // c2's Set reached c1
				fs.Caches[0].Stats.InvalidationsReceived == s1.InvalidationsReceived &&
				fs.Caches[1].Stats.InvalidationsReceived == s2.InvalidationsReceived
		})
		s1, s2 := t1.Stats(), t2.Stats()
		require.Equal(t, []string{"c1", "c2"}, []string{fs.Caches[0].ID, fs.Caches[1].ID})
		for i, s := range []cache.Stats{s1, s2} {
			got := fs.Caches[i].Stats
			require.Equal(t, [5]int64{s.L1Hits, s.L2Hits, s.Misses, s.Loads, s.InvalidationsSent},
				[5]int64{got.L1Hits, got.L2Hits, got.Misses, got.Loads, got.InvalidationsSent}, fs.Caches[i].ID)
			require.Equal(t, 20*time.Millisecond, fs.Caches[i].Every)
			require.Equal(t, 60*time.Millisecond, fs.Caches[i].Expires.Sub(fs.Caches[i].At))
		}
		require.Equal(t, int64(4), fs.Total.L1Hits)
		require.Equal(t, int64(4), fs.Total.L2Hits)
		require.Equal(t, int64(4), fs.Total.Loads)
		require.Equal(t, int64(1), fs.Total.InvalidationsSent)
		require.Equal(t, fs.Caches[0].Stats.InvalidationsReceived+fs.Caches[1].Stats.InvalidationsReceived, fs.Total.InvalidationsReceived)
		require.Equal(t, fs.Caches[0].Stats.PropagationCount+fs.Caches[1].Stats.PropagationCount, fs.Total.PropagationCount)
		for i, s := range []cache.Stats{s1, s2} {
			require.Equal(t, s.PropagationHistogram, fs.Caches[i].Stats.PropagationHistogram, "the published histogram")
		}
		var inHist int64
		for _, b := range fs.Total.PropagationHistogram {
			inHist += b.Count
		}
		require.Equal(t, fs.Total.PropagationCount, inHist, "the fleet's histogram holds every delay")
		require.False(t, fs.Total.Degraded)
		require.Zero(t, fs.Degraded)

		require.NoError(t, t1.InvalidateAll(ctx))
		require.Empty(t, readRaw(t, client, rowKey(t, t1, "#stats")), "the rows went")
		typ, err := client.Do(ctx, client.B().Type().Key(statsKey).Build()).ToString()
		require.NoError(t, err)
		require.Equal(t, "hash", typ, "the stats stayed: no row id names ecc:{<table>}#stats")

		c1.Close()
		fs, err = cache.ReadStats(ctx, client, name)
		require.NoError(t, err)
		require.Len(t, fs.Caches, 1, "Close withdrew c1's snapshot")
		require.Equal(t, "c2", fs.Caches[0].ID)
	})
}

// TestTableStatsSums: the fleet's state combines the caches' (any degraded, the earliest
// since, the largest propagation, a whole-table invalidation owed by any) and sums their
// propagation histograms bucket by bucket.
func TestTableStatsSums(t *testing.T) {
	t.Parallel()
	client := valkeytest.Shared(t).Client(t)
	ctx := context.Background()
	name := tableName(t)
	report := func(id, snap string) {
		cmd := client.B().Eval().Script(lua.Get("cache_stats_report").Source).Numkeys(1).Key(keys.MustTable(name).Stats()).
			Arg(id, snap, "60000", "0").Build()
		require.NoError(t, client.Do(ctx, cmd).Error())
	}
	report("a", `{"v":1,"l1_hits":5,"degraded":true,"degraded_since_ms":2000,"propagation_max_ns":7,"pending_invalidations":3,
		"propagation_hist":[[1000,3],[4000,1]]}`)
	report("b", `{"v":1,"l1_hits":6,"degraded":true,"degraded_since_ms":1000,"propagation_max_ns":9,"pending_invalidations":-1,
		"propagation_hist":[[9000,96],[1000,1],[2000,0]]}`)
	report("c", `{"v":1,"l1_hits":"not a number"}`)
	fs, err := cache.ReadStats(ctx, client, name)
	require.NoError(t, err)
	require.Len(t, fs.Caches, 2, "a snapshot that does not decode is left out")
	require.Equal(t, int64(11), fs.Total.L1Hits)
	require.Equal(t, 2, fs.Degraded)
	require.True(t, fs.Total.Degraded)
	require.Equal(t, time.UnixMilli(1000), fs.Total.DegradedSince)
	require.Equal(t, time.Duration(9), fs.Total.PropagationMax)
	require.Equal(t, []cache.HistogramBucket{{UpTo: 1000, Count: 4}, {UpTo: 4000, Count: 1}, {UpTo: 9000, Count: 96}},
		fs.Total.PropagationHistogram, "summed bucket by bucket, sorted, empty buckets dropped")
	require.Equal(t, time.Duration(9000), fs.Total.PropagationP50)
	require.Equal(t, time.Duration(9000), fs.Total.PropagationP99)
	require.Equal(t, -1, fs.Total.PendingInvalidations)

	_, err = cache.ReadStats(ctx, client, "bad name")
	require.ErrorIs(t, err, cache.ErrInvalid)
	_, err = cache.ReadStats(ctx, nil, name)
	require.ErrorIs(t, err, cache.ErrInvalid)
}

// TestStatsConfig: the new fields are validated and name themselves; negative StatsInterval
// publishes nothing and still lists the table.
func TestStatsConfig(t *testing.T) {
	t.Parallel()
	client := valkeytest.Shared(t).Client(t)
	for field, cfg := range map[string]cache.Config{
		"ID":            {ID: "a\x00b"},
		"StatsInterval": {StatsInterval: time.Millisecond},
	} {
		_, err := cache.New(client, cfg)
		require.ErrorIs(t, err, cache.ErrInvalid, field)
		require.ErrorContains(t, err, "Config."+field)
	}
	_, err := cache.New(client, cache.Config{StatsInterval: 9 * time.Hour})
	require.ErrorIs(t, err, cache.ErrInvalid)

	c, err := cache.New(client, cache.Config{StatsInterval: -1})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	name := tableName(t)
	newTable(t, c, tables.Spec{Name: name, L2Timeout: relaxedL2}, &source{})
	valkeytest.Eventually(t, 10*time.Second, "the table to be listed", func() bool {
		_, ok := listedTable(t, client, name)
		return ok
	})
	n, err := client.Do(context.Background(), client.B().Exists().Key(keys.MustTable(name).Stats()).Build()).AsInt64()
	require.NoError(t, err)
	require.Zero(t, n, "no stats published")
}

// TestTableRelisted: a registry entry lost while the table is in use (a forced failover to a
// replica that had not seen the ZADD, an operator's ZREM) comes back: the Cache lists its
// tables again once per relist interval, not once ever.
func TestTableRelisted(t *testing.T) {
	t.Parallel()
	client := valkeytest.Shared(t).Client(t)
	ctx := context.Background()
	name := tableName(t)
	c := newCache(t, client)
	cache.SetRelistEvery(c, 50*time.Millisecond)
	newTable(t, c, tables.Spec{Name: name, L2Timeout: relaxedL2}, &source{})
	valkeytest.Eventually(t, 10*time.Second, "the table to be listed", func() bool {
		_, ok := listedTable(t, client, name)
		return ok
	})
	require.NoError(t, client.Do(ctx, client.B().Zrem().Key(keys.TableRegistry()).Member(name).Build()).Error())
	valkeytest.Eventually(t, 10*time.Second, "the table to be listed again", func() bool {
		_, ok := listedTable(t, client, name)
		return ok
	})
}
