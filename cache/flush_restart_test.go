package cache_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/tables"
)

// TestOwedFlushRestartsOnAnotherServer: an owed whole-table invalidation stops part way
// (Valkey goes away) and Valkey comes back as a new process (a restart from its AOF here; a
// failover to a replica or a slot moved is the same). A SCAN cursor is a place in one
// process's hash table, whose bucket of a key depends on that process's random seed: resumed
// on the new process it would skip keys. cache_flush is given the server the cursor came from
// and starts the walk again on another: every row of the table is gone when the owed
// invalidation is reported sent.
func TestOwedFlushRestartsOnAnotherServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := valkeytest.Start(t, valkeytest.WithConfig("appendfsync", "always"))
	client := srv.Client(t)
	c, err := cache.New(client, cache.Config{ReconcileInterval: 100 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	tbl := newTable(t, c, tables.Spec{L2Timeout: relaxedL2}, &source{})
	const rows = 400
	for i := range rows {
		require.NoError(t, tbl.Set(ctx, strconv.Itoa(i), user{Name: "v"}))
	}
	c.SetFlushCount(10)
	var calls atomic.Int64
	var down atomic.Bool
	c.SetHookFlushStep(func() error {
		if down.Load() {
			return errors.New("valkey went away")
		}
		if calls.Add(1) == 20 { // about half way: the walk stops here
			down.Store(true)
			return errors.New("valkey went away")
		}
		return nil
	})
	tbl.OweAll()
	valkeytest.Eventually(t, 20*time.Second, "the walk to stop part way", func() bool { return down.Load() })
	n, err := client.Do(ctx, client.B().Scan().Cursor(0).Match(rowKey(t, tbl, "*")).Count(100000).Build()).AsScanEntry()
	require.NoError(t, err)
	t.Logf("rows left after the first part of the walk: %d of %d", len(n.Elements), rows)
	require.NoError(t, srv.Restart())
	down.Store(false)
	valkeytest.Eventually(t, 30*time.Second, "the owed invalidation to be sent", func() bool {
		return tbl.Stats().PendingInvalidations == 0
	})
	left, err := client.Do(ctx, client.B().Scan().Cursor(0).Match(rowKey(t, tbl, "*")).Count(100000).Build()).AsScanEntry()
	require.NoError(t, err)
	require.Empty(t, left.Elements, "the owed whole-table invalidation was reported sent, yet %d rows survive it", len(left.Elements))
}
