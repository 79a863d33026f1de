package cache_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/tables"
)

// TestGetManyLostLeaseIsGivenBack: GetMany reads the rows (MGET, answered), then the
// server is stopped before it takes the fill leases with SET NX GET: they time out, and the
// server runs them once it is continued, leaving GetMany's leases. As with Get's lost lease
// (TestLostReadReleasesItsLease), they are given back as soon as Valkey answers, not left for
// every process to wait out for LeaseTTL.
func TestGetManyLostLeaseIsGivenBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := valkeytest.Start(t, valkeytest.WithoutPersistence())
	client := srv.Client(t)
	src := &source{}
	spec := tables.Spec{Name: tableName(t), L2Timeout: 100 * time.Millisecond, DegradedLoads: tables.Off, LoaderTimeout: 10 * time.Second}
	tbl := newTable(t, newCache(t, client), spec, src)
	ids := []string{"a", "b"}
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
	_, err = tbl.GetMany(ctx, append([]string{"warm"}, ids...))
	t.Logf("GetMany with Valkey stopped after its read: %v", err)
	require.ErrorIs(t, err, cache.ErrL2Timeout)
	require.NoError(t, srv.Continue())
	continued := time.Now()
	for _, id := range ids {
		key := rowKey(t, tbl, id)
		valkeytest.Eventually(t, 5*time.Second, "the lost lease of "+id+" to be given back", func() bool {
			return readRaw(t, client, key) == ""
		})
	}
	require.Less(t, time.Since(continued), tbl.Spec().LeaseTTL()/2, "well before the leases would expire")
	require.Equal(t, int64(1), src.calls.Load())
}

// TestFillLostLeaseIsGivenBack: a fill that waited out another filler's lease takes the
// row with SET NX; the server, stopped, runs that write only after the fill gave up on it,
// leaving the fill's lease, which is given back as soon as Valkey answers.
func TestFillLostLeaseIsGivenBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := valkeytest.Start(t, valkeytest.WithoutPersistence())
	client := srv.Client(t)
	src := &source{}
	spec := tables.Spec{Name: tableName(t), L2Timeout: 100 * time.Millisecond, DegradedLoads: tables.Off, LoaderTimeout: 10 * time.Second}
	tbl := newTable(t, newCache(t, client), spec, src)
	key := rowKey(t, tbl, "k")
	// Another filler's lease, about to expire.
	require.NoError(t, client.Do(ctx, client.B().Set().Key(key).Value(cache.LeaseRow("OtherFillerToken")).PxMilliseconds(300).Build()).Error())

	var stopped atomic.Bool
	tbl.SetHookAfterRead(func(string) {
		// The other lease expired: the fill's next step is its own SET NX.
		if !stopped.Load() && readRaw(t, client, key) == "" {
			stopped.Store(true)
			require.NoError(t, srv.Stop())
		}
	})
	t.Cleanup(func() { _ = srv.Continue() })
	_, err := tbl.Get(ctx, "k")
	t.Logf("Get with Valkey stopped before the fill's SET NX: %v", err)
	require.ErrorIs(t, err, cache.ErrL2Timeout)
	require.NoError(t, srv.Continue())
	continued := time.Now()
	valkeytest.Eventually(t, 5*time.Second, "the fill's lost lease to be given back", func() bool {
		return readRaw(t, client, key) == ""
	})
	require.Less(t, time.Since(continued), tbl.Spec().LeaseTTL()/2, "well before the lease would expire")
	require.Zero(t, src.calls.Load())
}
