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

// TestInvalidateAllKeepsWhatWasOwedMeanwhile: InvalidateAll lets Sets run beside it. A Set of
// x that fails while its walk runs (its caller's context is cancelled: remembered, as any
// unreachable error), after the walk has passed x's shard and a fill elsewhere wrote x's row
// again from the database as it was before the Set's commit, stays owed when InvalidateAll
// succeeds, for the next reconcile to send (the walk may have passed x before its row came back).
func TestInvalidateAllKeepsWhatWasOwedMeanwhile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := valkeytest.Start(t, valkeytest.WithoutPersistence())
	var truth atomic.Value
	truth.Store("old")
	load := func(context.Context, string) (user, error) { return user{Name: truth.Load().(string)}, nil }
	spec := tables.Spec{Name: tableName(t), Shards: 2, L2Timeout: relaxedL2}

	c1, err := cache.New(srv.Client(t), cache.Config{ReconcileInterval: time.Hour})
	require.NoError(t, err)
	t.Cleanup(c1.Close)
	t1, err := cache.NewTable(c1, spec, load, nil)
	require.NoError(t, err)
	c2, err := cache.New(srv.Client(t), cache.Config{ReconcileInterval: time.Hour})
	require.NoError(t, err)
	t.Cleanup(c2.Close)
	t2, err := cache.NewTable(c2, spec, load, nil)
	require.NoError(t, err)

	x := ""
	for i := 0; x == ""; i++ {
		if id := "k" + strconv.Itoa(i); keys.ShardOf(id, 2) == 0 {
			x = id
		}
	}
	var calls atomic.Int64
	var setErr error
	c1.SetHookFlushStep(func() error {
		if calls.Add(1) != 2 { // before shard 1's walk: shard 0 (x's) is done
			return nil
		}
		// Elsewhere, a fill of x reads the database before the commit below and writes the row.
		u, err := t2.Get(ctx, x)
		require.NoError(t, err)
		require.Equal(t, "old", u.Name)
		// The commit, and its Set, which fails.
		truth.Store("new")
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		setErr = t1.Set(cctx, x, user{Name: "new"})
		require.Equal(t, 1, t1.Stats().PendingInvalidations, "the failed Set is owed")
		return nil
	})
	require.NoError(t, t1.InvalidateAll(ctx))
	require.Error(t, setErr)
	require.Equal(t, int64(2), calls.Load())

	c3, err := cache.New(srv.Client(t), cache.Config{})
	require.NoError(t, err)
	t.Cleanup(c3.Close)
	t3, err := cache.NewTable(c3, spec, load, nil)
	require.NoError(t, err)
	u, err := t3.Get(ctx, x)
	require.NoError(t, err)
	t.Logf("after InvalidateAll: pending %d, a fresh reader gets %q, the database holds %q",
		t1.Stats().PendingInvalidations, u.Name, truth.Load())
	require.Equal(t, 1, t1.Stats().PendingInvalidations, "the failed Set's invalidation is still owed")
}
