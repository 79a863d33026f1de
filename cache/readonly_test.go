package cache_test

import (
	"context"
	"testing"
	"time"

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

// TestLostReadReleasesItsLease: a miss's read (SET NX GET) sent to a stopped server times out,
// and the server runs it once it is continued, leaving the read's lease; the read gives it
// back as soon as Valkey answers, so nobody waits out the lease's lifetime (LeaseTTL).
func TestLostReadReleasesItsLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := valkeytest.Start(t, valkeytest.WithoutPersistence())
	client := srv.Client(t)
	src := &source{}
	spec := tables.Spec{Name: tableName(t), L2Timeout: 100 * time.Millisecond, DegradedLoads: tables.Off, LoaderTimeout: 10 * time.Second}
	tbl := newTable(t, newCache(t, client), spec, src)
	key := rowKey(t, tbl, "k")
	// The connection is made before the server stops: a dial to a stopped server is not the
	// read timeout this test is about (under the whole suite's load, a Get once failed after
	// 12 s with another error).
	require.NoError(t, client.Do(ctx, client.B().Ping().Build()).Error())
	require.NoError(t, srv.Stop())
	_, err := tbl.Get(ctx, "k")
	require.ErrorIs(t, err, cache.ErrL2Timeout)
	require.NoError(t, srv.Continue())
	continued := time.Now()
	valkeytest.Eventually(t, 5*time.Second, "the lost read's lease to be given back", func() bool {
		return readRaw(t, client, key) == ""
	})
	require.Less(t, time.Since(continued), tbl.Spec().LeaseTTL()/2, "well before the lease would expire")
	require.Zero(t, src.calls.Load())
	_, err = tbl.Get(ctx, "k")
	require.NoError(t, err)
	require.Zero(t, tbl.Stats().LeaseWaits, "the next read waited on no lease")
}
