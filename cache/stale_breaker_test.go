package cache_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/tables"
)

// TestStaleReadsOpenTheBreaker: with valkey-server SIGSTOPped, the reads of a stale-on-error
// table that its StaleTimeout cuts short (here as long as its L2Timeout, as by default) are
// L2 timeouts, not the caller's: they open the breaker, and the reads after it answer the
// stale value at once instead of each waiting StaleTimeout for a server that is not there.
func TestStaleReadsOpenTheBreaker(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := valkeytest.Start(t, valkeytest.WithoutPersistence())
	const wait = 100 * time.Millisecond
	c, err := cache.New(srv.Client(t), cache.Config{BreakerProbe: time.Hour})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	spec := tables.Spec{L1TTL: 50 * time.Millisecond, StaleOnError: time.Minute, StaleTimeout: wait, L2Timeout: wait, DegradedLoads: tables.Off}
	tbl := newTable(t, c, spec, &source{})
	valkeytest.Eventually(t, 10*time.Second, "synced", tbl.Synced)
	const n = 10
	for i := range n {
		_, err := tbl.Get(ctx, strconv.Itoa(i))
		require.NoError(t, err)
	}
	require.NoError(t, srv.Stop())
	t.Cleanup(func() { _ = srv.Continue() })
	time.Sleep(100 * time.Millisecond) // past L1TTL: every entry is stale

	var slow int
	for i := range n {
		start := time.Now()
		u, err := tbl.Get(ctx, strconv.Itoa(i))
		require.NoError(t, err)
		require.Equal(t, "name-"+strconv.Itoa(i), u.Name)
		if time.Since(start) >= wait {
			slow++
		}
	}
	st := tbl.Stats()
	require.Equal(t, int64(n), st.StaleServed)
	require.Equal(t, int64(1), st.BreakerOpens, "the stale timeouts were L2 failures")
	require.Equal(t, cache.DefaultBreakerFailures, slow, "only the reads before the breaker opened waited")
}
