package cache_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/tables"
)

// cancelled is a context already ended: a write under it never reaches Valkey, and the table
// owes its invalidation.
func cancelled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// cacheEvery is a Cache over client with the reconcile every interval.
func cacheEvery(t *testing.T, client valkey.Client, interval time.Duration) *cache.Cache {
	t.Helper()
	c, err := cache.New(client, cache.Config{ReconcileInterval: interval, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// TestInvalidateAllFirstWriteFlushesOthers: on a table only read so far (no coherence record
// yet), InvalidateAll's message is the record's first, seq 1 and no ids. It was adopted as
// "the record was just made, nothing missed", and the other process served its L1 copy until
// its TTL, every reconcile agreeing with it. A first message that names no ids is a flush.
func TestInvalidateAllFirstWriteFlushesOthers(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{1, 3} {
		t.Run("shards="+string(rune('0'+shards)), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			src := newDB()
			spec := tables.Spec{Name: tableName(t), Shards: shards}
			a, err := cache.NewTable(cacheEvery(t, valkeytest.Shared(t).Client(t), 200*time.Millisecond), spec, src.load, nil)
			require.NoError(t, err)
			b, err := cache.NewTable(cacheEvery(t, valkeytest.Shared(t).Client(t), 200*time.Millisecond), spec, src.load, nil)
			require.NoError(t, err)
			v, err := b.Get(ctx, "k")
			require.NoError(t, err)
			require.Zero(t, v)

			require.Equal(t, 1, src.bump("k"))
			require.NoError(t, a.InvalidateAll(ctx))
			valkeytest.Eventually(t, 5*time.Second, "b to read the value after InvalidateAll", func() bool {
				v, err := b.Get(ctx, "k")
				require.NoError(t, err)
				return v == 1
			})
		})
	}
}

// TestRetriedInvalidationDropsOwnL1: a Set that did not reach Valkey is owed; with degraded
// mode off the owing table's reads go to L2, and this process copies the old row into L1.
// The reconcile's retry deletes the row and publishes under this process's own token, which
// its subscription skips (a writer drops its ids itself): the retry now drops them too. It
// used to serve the old value until L1's TTL.
func TestRetriedInvalidationDropsOwnL1(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := newDB()
	tbl, err := cache.NewTable(cacheEvery(t, valkeytest.Shared(t).Client(t), 200*time.Millisecond),
		tables.Spec{Name: tableName(t), DegradedLoads: tables.Off}, src.load, nil)
	require.NoError(t, err)
	require.NoError(t, tbl.Invalidate(ctx, "unrelated")) // the table's record exists
	_, err = tbl.Get(ctx, "k")
	require.NoError(t, err)

	require.Equal(t, 1, src.bump("k"))
	require.Error(t, tbl.Set(cancelled(), "k", 1))
	require.Equal(t, 1, tbl.Stats().PendingInvalidations)
	_, _, err = tbl.Lookup(ctx, "k") // to L2, and into L1
	require.NoError(t, err)
	valkeytest.Eventually(t, 5*time.Second, "the owed invalidation to be sent", func() bool {
		return tbl.Stats().PendingInvalidations == 0
	})
	v, tier, err := tbl.Lookup(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, 1, v, "the old value from %v", tier)
}

// TestOwedIDsCountedOnce: MaxPendingInvalidations bounds the distinct ids a table owes; an id
// refused twice (or named twice in one call) is one. It counted each time, and the table
// overflowed into a whole-table invalidation (every row deleted, every L1 flushed).
func TestOwedIDsCountedOnce(t *testing.T) {
	t.Parallel()
	src := newDB()
	tbl, err := cache.NewTable(cacheEvery(t, valkeytest.Shared(t).Client(t), time.Hour),
		tables.Spec{Name: tableName(t), MaxPendingInvalidations: 2}, src.load, nil)
	require.NoError(t, err)
	require.Error(t, tbl.Set(cancelled(), "k", 1))
	require.Error(t, tbl.Set(cancelled(), "a", 1))
	require.Error(t, tbl.Set(cancelled(), "k", 2))
	require.Error(t, tbl.Invalidate(cancelled(), "a", "a"))
	require.Equal(t, 2, tbl.Stats().PendingInvalidations, "two distinct ids, within the bound (-1: the whole table)")
}
