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

// TestOwedFlushResumes: an owed whole-table invalidation whose walk cannot end within one
// reconcile (on a large database; here, every fourth cache_flush call fails) resumes where it
// stopped at the next reconcile, instead of beginning again and never ending: every row goes,
// and nothing is owed any more.
func TestOwedFlushResumes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := valkeytest.Start(t, valkeytest.WithoutPersistence())
	client := srv.Client(t)
	c, err := cache.New(client, cache.Config{ReconcileInterval: 100 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	tbl := newTable(t, c, tables.Spec{L2Timeout: relaxedL2}, &source{})
	const rows = 300
	for i := range rows {
		require.NoError(t, tbl.Set(ctx, strconv.Itoa(i), user{Name: "v"}))
	}
	c.SetFlushCount(10) // a walk of about 30 calls over this database
	var calls atomic.Int64
	c.SetHookFlushStep(func() error {
		if calls.Add(1)%4 == 0 {
			return errors.New("the reconcile's deadline")
		}
		return nil
	})
	tbl.OweAll()
	valkeytest.Eventually(t, 20*time.Second, "the owed invalidation to be sent", func() bool {
		return tbl.Stats().PendingInvalidations == 0
	})
	left, err := client.Do(ctx, client.B().Scan().Cursor(0).Match(rowKey(t, tbl, "*")).Count(10000).Build()).AsScanEntry()
	require.NoError(t, err)
	require.Empty(t, left.Elements, "every row was deleted")
	require.Less(t, calls.Load(), int64(80), "the walk resumed instead of beginning again")
}
