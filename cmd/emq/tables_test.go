package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/tables"
)

// seedTable declares a table in a Cache that publishes its stats every 50 ms and reads it: 2
// misses (2 loads, one a not-found), 3 L1 hits, then one Set (an invalidation sent and
// received back).
func seedTable(t *testing.T, srv *valkeytest.Server) (string, *cache.Table[int64, string]) {
	t.Helper()
	ctx := context.Background()
	c, err := cache.New(srv.Client(t), cache.Config{ID: "c1", StatsInterval: time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	name := valkeytest.TestName(t)
	tbl, err := cache.NewTable(c, tables.Spec{Name: name, TTL: time.Minute}, func(_ context.Context, id int64) (string, error) {
		if id == 404 {
			return "", cache.ErrNotFound
		}
		return fmt.Sprint("v", id), nil
	}, nil)
	require.NoError(t, err)
	_, err = tbl.Get(ctx, 1)
	require.NoError(t, err)
	_, err = tbl.Get(ctx, 404)
	require.ErrorIs(t, err, cache.ErrNotFound)
	for range 3 {
		_, err = tbl.Get(ctx, 1)
		require.NoError(t, err)
	}
	require.NoError(t, tbl.Set(ctx, 2, "two"))
	waitFor(t, "the table's published stats show the reads and the invalidation received", func() bool {
		fs, err := cache.ReadStats(ctx, srv.Client(t), name)
		return err == nil && len(fs.Caches) == 1 && fs.Total.L1Hits == 3 && fs.Total.InvalidationsReceived == 1
	})
	return name, tbl
}

func TestTables(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Shared(t)
	name, _ := seedTable(t, srv)

	var rows []tableRow
	okJSON(t, srv.Addr, &rows, "tables")
	var got *tableRow
	for i := range rows {
		if rows[i].Name == name {
			got = &rows[i]
		}
	}
	require.NotNil(t, got, "emq tables lists %s", name)
	require.Equal(t, tableRow{Name: name, FirstSeen: got.FirstSeen, Caches: 1, L1Hits: 3, Misses: 2}, *got)
	require.Contains(t, lines(ok(t, srv.Addr, "tables")), fmt.Sprintf("%s 1 0 3 0 2 %s", name, fmtTime(got.FirstSeen)))

	var s tableStats
	okJSON(t, srv.Addr, &s, "table", name)
	require.Equal(t, name, s.Table)
	require.Equal(t, 1, s.Caches)
	require.Equal(t, int64(5), s.Reads)
	require.InDelta(t, 0.6, s.L1HitRatio, 1e-9)
	require.InDelta(t, 0.6, s.HitRatio, 1e-9)
	require.Equal(t, int64(2), s.Loads)
	require.Zero(t, s.LoadErrors)
	require.Equal(t, int64(1), s.InvalidationsSent)
	require.Equal(t, int64(1), s.InvalidationsReceived)
	require.Equal(t, int64(1), s.PropagationCount)
	require.Greater(t, s.PropagationMaxMS, 0.0)
	require.InDelta(t, s.PropagationMaxMS, s.PropagationMeanMS, 1e-9, "one message: mean is max")
	require.Len(t, s.PerCache, 1)
	require.Equal(t, "c1", s.PerCache[0].ID)

	text := lines(ok(t, srv.Addr, "table", name))
	require.Equal(t, []string{
		"table: " + name,
		"caches: 1 live, 0 degraded",
		"reads: 5 (L1 3, L2 0, misses 2)",
		"hit ratio: L1 60.0%, L1+L2 60.0%",
		"loads: 2 (0 failed)",
		"invalidations: 1 sent, 1 received, 0 owed",
		"coherence: 0 gaps, 0 regressions, 0 flushes",
	}, text[:7])
	require.True(t, strings.HasPrefix(text[7], "propagation: 1 received, mean "), text[7])
	require.Equal(t, "CACHE REPORTED DEGRADED L1 HITS L2 HITS MISSES", text[9])
	require.True(t, strings.HasPrefix(text[10], "c1 "), text[10])
}
