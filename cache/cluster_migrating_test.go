package cache_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/tables"
)

// TestGetManyWhileSlotMigrates: while the table's slot is migrating (nothing moved yet), a
// GetMany of two rows on the source and a miss is served at once. As one MGET it was refused
// (TRYAGAIN: a command of several keys, one missing), which the client retried until the
// L2 timeout, for as long as the migration lasted: GetMany failed, or went degraded.
func TestGetManyWhileSlotMigrates(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a dedicated cluster")
	}
	t.Parallel()
	ctx := context.Background()
	cl := valkeytest.StartCluster(t)
	c, err := cache.New(cl.Client(t), cache.Config{})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	name := tableName(t)
	var loads atomic.Int64
	load := func(context.Context, string) (int, error) { loads.Add(1); return 7, nil }
	tbl, err := cache.NewTable(c, tables.Spec{Name: name, L2Timeout: time.Second, DegradedLoads: tables.Off}, load, nil)
	require.NoError(t, err)
	require.NoError(t, tbl.Set(ctx, "1", 1))
	require.NoError(t, tbl.Set(ctx, "2", 2))
	slot := keys.Slot(keys.MustTable(name).Record())
	end, err := cl.BeginMigration(ctx, slot, cl.OtherPrimary(slot))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, end()) })

	start := time.Now()
	got, err := tbl.GetMany(ctx, []string{"1", "2", "missing"})
	require.NoError(t, err)
	require.Less(t, time.Since(start), 500*time.Millisecond, "GetMany waited on a refused read")
	require.Equal(t, map[string]int{"1": 1, "2": 2, "missing": 7}, got)
	require.EqualValues(t, 1, loads.Load(), "only the miss was loaded")
	require.False(t, tbl.Stats().Degraded)
}
