package cache_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/tables"
)

// TestGetManyDegradedWhenLeasesFail: GetMany reads its rows (MGET), then leases the missing
// ones (SET NX GET). When L2 fails at that step, degraded mode answers those ids from the
// loader, as it answers a Get whose fill fails on L2: a server that refuses writes (out of
// memory under noeviction) while it serves reads, and a server stopped between the read and
// the leases.
func TestGetManyDegradedWhenLeasesFail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("writes refused", func(t *testing.T) {
		t.Parallel()
		srv := valkeytest.Start(t, valkeytest.WithoutPersistence())
		client := srv.Client(t)
		src := &source{}
		spec := tables.Spec{Name: tableName(t), L2Timeout: relaxedL2, L1TTL: tables.Off}
		tbl := newTable(t, newCache(t, client), spec, src)
		_, err := tbl.Get(ctx, "k") // a row
		require.NoError(t, err)
		_, err = srv.Do(ctx, "CONFIG", "SET", "maxmemory-policy", "noeviction")
		require.NoError(t, err)
		_, err = srv.Do(ctx, "CONFIG", "SET", "maxmemory", "1")
		require.NoError(t, err)
		t.Cleanup(func() { _, _ = srv.Do(context.Background(), "CONFIG", "SET", "maxmemory", "0") })
		require.ErrorContains(t, client.Do(ctx, client.B().Set().Key("probe").Value("x").Build()).Error(), "OOM")

		got, err := tbl.GetMany(ctx, []string{"k", "absent"})
		require.NoError(t, err, "no lease to take: the loader answers")
		require.Equal(t, "name-k", got["k"].Name, "read from its row")
		require.Equal(t, "name-absent", got["absent"].Name)
		require.Equal(t, int64(2), src.calls.Load(), "k's fill, then absent's degraded load")
	})

	t.Run("stopped after the read", func(t *testing.T) {
		t.Parallel()
		const l2Timeout = 200 * time.Millisecond
		srv := valkeytest.Start(t, valkeytest.WithoutPersistence())
		src := &source{}
		spec := tables.Spec{Name: tableName(t), L2Timeout: l2Timeout}
		tbl := newTable(t, newCache(t, srv.Client(t)), spec, src)
		_, err := tbl.Get(ctx, "warm") // a row, whose install marks the end of GetMany's read
		require.NoError(t, err)
		tbl.Forget("warm")
		var stopped atomic.Bool
		tbl.SetHookBeforeInstall(func(id string) {
			if id == "warm" && stopped.CompareAndSwap(false, true) {
				require.NoError(t, srv.Stop())
			}
		})
		t.Cleanup(func() { _ = srv.Continue() })
		start := time.Now()
		got, err := tbl.GetMany(ctx, []string{"warm", "a", "b"})
		elapsed := time.Since(start)
		t.Logf("GetMany with Valkey stopped after its read: %d values, %v, after %v", len(got), err, elapsed)
		require.True(t, stopped.Load())
		require.NoError(t, err, "degraded mode answers the ids whose leases failed")
		require.Len(t, got, 3)
		require.Equal(t, "name-a", got["a"].Name)
		require.Equal(t, "name-b", got["b"].Name)
		require.Less(t, elapsed, 2*l2Timeout+slack, "the lease step's timeout, then the loader")
	})
}
