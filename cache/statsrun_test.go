package cache_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
)

// TestStatsRun: the stats reads of several tables, pipelined by the caller in one round trip,
// decode to what ReadStats answers for each; a bad name is refused before anything is sent.
func TestStatsRun(t *testing.T) {
	t.Parallel()
	client := valkeytest.Shared(t).Client(t)
	ctx := context.Background()
	a, b := tableName(t)+"a", tableName(t)+"b"
	cmd := client.B().Eval().Script(lua.Get("cache_stats_report").Source).Numkeys(1).Key(keys.MustTable(a).Stats()).
		Arg("c1", `{"v":1,"l1_hits":5,"l2_hits":2,"misses":1}`, "60000", "0").Build()
	require.NoError(t, client.Do(ctx, cmd).Error())

	ra, err := cache.StatsRun(a)
	require.NoError(t, err)
	rb, err := cache.StatsRun(b)
	require.NoError(t, err)
	replies, _ := lua.Pipeline(ctx, client, []lua.Run{ra, rb}, nil)
	fa, err := cache.DecodeStats(a, replies[0])
	require.NoError(t, err)
	fb, err := cache.DecodeStats(b, replies[1])
	require.NoError(t, err)
	want, err := cache.ReadStats(ctx, client, a)
	require.NoError(t, err)
	require.Equal(t, want.Caches, fa.Caches)
	require.Equal(t, int64(5), fa.Total.L1Hits)
	require.Equal(t, int64(2), fa.Total.L2Hits)
	require.Empty(t, fb.Caches, "a table nobody reports on")
	require.Equal(t, b, fb.Table)

	_, err = cache.StatsRun("no{t}")
	require.ErrorIs(t, err, cache.ErrInvalid)
}
