package cache_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/tables"
)

// owedFlushTable is a table of rows rows on srv, in a cache that reconciles every 100 ms and
// walks 10 keys per cache_flush call, with step run before each call of a whole-table
// invalidation's walk (an error fails the call).
func owedFlushTable(t *testing.T, srv *valkeytest.Server, rows int, step func() error) (valkey.Client, *cache.Table[string, user]) {
	t.Helper()
	client := srv.Client(t)
	c, err := cache.New(client, cache.Config{ReconcileInterval: 100 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	tbl := newTable(t, c, tables.Spec{L2Timeout: relaxedL2}, &source{})
	for i := range rows {
		require.NoError(t, tbl.Set(context.Background(), strconv.Itoa(i), user{Name: "v"}))
	}
	c.SetFlushCount(10)
	c.SetHookFlushStep(step)
	return client, tbl
}

// rowsLeft is how many rows tbl has in L2.
func rowsLeft(t *testing.T, client valkey.Client, tbl *cache.Table[string, user]) int {
	t.Helper()
	left, err := client.Do(context.Background(), client.B().Scan().Cursor(0).Match(rowKey(t, tbl, "*")).Count(100000).Build()).AsScanEntry()
	require.NoError(t, err)
	return len(left.Elements)
}

// TestOwedFlushResumes: an owed whole-table invalidation whose walk cannot end within one
// reconcile (on a large database; here, every fourth cache_flush call fails) resumes where it
// stopped at the next reconcile, instead of beginning again and never ending: every row goes,
// and nothing is owed any more.
func TestOwedFlushResumes(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	client, tbl := owedFlushTable(t, valkeytest.Start(t, valkeytest.WithoutPersistence()), 300, func() error {
		if calls.Add(1)%4 == 0 {
			return errors.New("the reconcile's deadline")
		}
		return nil
	}) // a walk of about 30 calls over this database
	tbl.OweAll()
	valkeytest.Eventually(t, 20*time.Second, "the owed invalidation to be sent", func() bool {
		return tbl.Stats().PendingInvalidations == 0
	})
	require.Zero(t, rowsLeft(t, client, tbl), "every row was deleted")
	require.Less(t, calls.Load(), int64(80), "the walk resumed instead of beginning again")
}

// TestOwedFlushRestartsOnAnotherServer: an owed whole-table invalidation stops part way
// (Valkey goes away) and Valkey comes back as a new process (a restart from its AOF here; a
// failover to a replica or a slot moved is the same). A SCAN cursor is a place in one
// process's hash table, whose bucket of a key depends on that process's random seed: resumed
// on the new process it would skip keys. cache_flush is given the server the cursor came from
// and starts the walk again on another: every row of the table is gone when the owed
// invalidation is reported sent.
func TestOwedFlushRestartsOnAnotherServer(t *testing.T) {
	t.Parallel()
	const rows = 400
	srv := valkeytest.Start(t, valkeytest.WithConfig("appendfsync", "always"))
	var calls atomic.Int64
	var down atomic.Bool
	client, tbl := owedFlushTable(t, srv, rows, func() error {
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
	valkeytest.Eventually(t, 20*time.Second, "the walk to stop part way", down.Load)
	t.Logf("rows left after the first part of the walk: %d of %d", rowsLeft(t, client, tbl), rows)
	require.NoError(t, srv.Restart())
	down.Store(false)
	valkeytest.Eventually(t, 30*time.Second, "the owed invalidation to be sent", func() bool {
		return tbl.Stats().PendingInvalidations == 0
	})
	require.Zero(t, rowsLeft(t, client, tbl), "rows survived the owed whole-table invalidation")
}
