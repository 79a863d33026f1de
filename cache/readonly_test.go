package cache_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/tables"
)

// TestReadsWhenWritesRefused: a miss reads with SET NX GET, a write; a server that refuses
// writes (here out of memory under noeviction) still answers reads: the row is read with
// GET instead, and an id without a row is served by degraded mode's loader.
func TestReadsWhenWritesRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := valkeytest.Start(t, valkeytest.WithoutPersistence())
	client := srv.Client(t)
	src := &source{}
	spec := tables.Spec{Name: tableName(t), L2Timeout: relaxedL2, L1TTL: tables.Off}
	writer := newTable(t, newCache(t, client), spec, src)
	_, err := writer.Get(ctx, "k") // fills the row
	require.NoError(t, err)
	require.Equal(t, int64(1), src.calls.Load())

	_, err = srv.Do(ctx, "CONFIG", "SET", "maxmemory-policy", "noeviction")
	require.NoError(t, err)
	_, err = srv.Do(ctx, "CONFIG", "SET", "maxmemory", "1")
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = srv.Do(context.Background(), "CONFIG", "SET", "maxmemory", "0") })
	err = client.Do(ctx, client.B().Set().Key("probe").Value("x").Build()).Error()
	require.ErrorContains(t, err, "OOM", "the server refuses writes")

	reader := newTable(t, newCache(t, client), spec, src)
	u, tier, err := reader.Lookup(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, cache.TierL2, tier, "the row is read although SET NX GET is refused")
	require.Equal(t, "name-k", u.Name)
	require.Equal(t, int64(1), src.calls.Load())

	u, tier, err = reader.Lookup(ctx, "absent")
	require.NoError(t, err)
	require.Equal(t, cache.TierDegraded, tier, "no row and no lease to take: the loader answers")
	require.Equal(t, "name-absent", u.Name)
}
