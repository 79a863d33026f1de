package cache_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/tables"
)

// TestGetManyChunks: a GetMany of 25,000 missing ids reads, leases and loads them 1,000 at a
// time: the batch loader is called 25 times with at most 1,000 ids, every value comes back,
// and the table stays out of degraded mode. In one piece, 200,000 ids outlasted the 250 ms
// L2Timeout of their leases, and the table went degraded on a healthy server. Under -race on
// a loaded machine a chunk's round trip can outlast 250 ms too (the reads, the leases or the
// write of 1,000 rows), so this test, which runs with the race detector, gives its round
// trips relaxedL2; TestGetManyChunksWithinL2Timeout, a timing test, holds the chunks to the
// default L2Timeout.
func TestGetManyChunks(t *testing.T) {
	t.Parallel()
	getManyChunks(t, relaxedL2)
}

// TestGetManyChunksWithinL2Timeout is TestGetManyChunks with the default L2Timeout (250 ms):
// every chunk's round trips are answered within it on a healthy server, so the table stays
// out of degraded mode and the breaker closed. A timing test: make test runs it alone,
// without the race detector.
func TestGetManyChunksWithinL2Timeout(t *testing.T) {
	valkeytest.Timing(t)
	getManyChunks(t, 0)
}

// getManyChunks runs the GetMany of 25,000 missing ids of TestGetManyChunks on a table with
// L2Timeout l2 (0: the default).
func getManyChunks(t *testing.T, l2 time.Duration) {
	ctx := context.Background()
	c, err := cache.New(valkeytest.Shared(t).Client(t), cache.Config{StatsInterval: -1})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	var mu sync.Mutex
	var sizes []int
	tbl, err := cache.NewTable(c, tables.Spec{Name: tableName(t), TTL: time.Minute, L2Timeout: l2},
		func(_ context.Context, id int64) (int64, error) { return id, nil },
		&cache.TableOpts[int64, int64]{BatchLoad: func(_ context.Context, ids []int64) (map[int64]int64, error) {
			mu.Lock()
			sizes = append(sizes, len(ids))
			mu.Unlock()
			out := make(map[int64]int64, len(ids))
			for _, id := range ids {
				out[id] = -id
			}
			return out, nil
		}})
	require.NoError(t, err)
	ids := make([]int64, 25_000)
	for i := range ids {
		ids[i] = int64(i)
	}
	got, err := tbl.GetMany(ctx, ids)
	require.NoError(t, err)
	require.Len(t, got, len(ids))
	for _, id := range ids {
		require.Equal(t, -id, got[id])
	}
	mu.Lock()
	require.Len(t, sizes, 25)
	for _, n := range sizes {
		require.LessOrEqual(t, n, 1000)
	}
	mu.Unlock()
	st := tbl.Stats()
	require.False(t, st.Degraded)
	require.Zero(t, st.BreakerOpens)
	require.Equal(t, int64(25), st.Loads, "one loader call a chunk")
}

// TestGetManyChunksBadID: an id that is not valid refuses a GetMany of several chunks before
// the first chunk reads, leases or loads anything.
func TestGetManyChunksBadID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := valkeytest.Shared(t).Client(t)
	c, err := cache.New(client, cache.Config{StatsInterval: -1})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	tbl, err := cache.NewTable(c, tables.Spec{Name: tableName(t), TTL: time.Minute},
		func(_ context.Context, id string) (string, error) { return id, nil }, nil)
	require.NoError(t, err)
	ids := make([]string, 1500)
	for i := range ids {
		ids[i] = "u" + strconv.Itoa(i)
	}
	ids[len(ids)-1] = "bad\nid"
	got, err := tbl.GetMany(ctx, ids)
	require.ErrorIs(t, err, keys.ErrInvalid)
	require.Zero(t, len(got), "nothing read")
	require.Zero(t, tbl.Stats().Loads)
	n, err := client.Do(ctx, client.B().Exists().Key(rowKey(t, tbl, "u0")).Build()).AsInt64()
	require.NoError(t, err)
	require.Zero(t, n, "no row was written")
}
