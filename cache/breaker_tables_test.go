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

// TestBreakerDegradesAndSettlesEveryTable: the breaker is the cache's, so when reads of one
// table open it, every table of the cache is degraded (Stats.Degraded), the one nobody read
// too; and the reconcile that closes it, here one that a kick asked for the read table only,
// settles every table: none is left degraded, reading L2 with an L1 its record did not
// confirm.
func TestBreakerDegradesAndSettlesEveryTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := valkeytest.Start(t, valkeytest.WithoutPersistence())
	// Neither the reconcile interval nor the probe can come during the test: only the kick.
	c, err := cache.New(srv.Client(t), cache.Config{ReconcileInterval: time.Hour, BreakerProbe: time.Hour})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	src := &source{}
	spec := tables.Spec{L2Timeout: 50 * time.Millisecond}
	spec.Name = tableName(t) + "-read"
	read := newTable(t, c, spec, src)
	spec.Name = tableName(t) + "-idle"
	idle := newTable(t, c, spec, src)
	valkeytest.Eventually(t, 10*time.Second, "both tables synced", func() bool { return read.Synced() && idle.Synced() })

	require.NoError(t, srv.Stop())
	stopped := true
	defer func() {
		if stopped {
			_ = srv.Continue()
		}
	}()
	for i := 0; read.Stats().BreakerOpens == 0; i++ {
		require.Less(t, i, 20, "the breaker did not open")
		_, err := read.Get(ctx, strconv.Itoa(i)) // a new id each time: none is in L1
		require.NoError(t, err, "degraded mode answers from the loader")
	}
	require.True(t, read.Stats().Degraded)
	require.True(t, idle.Stats().Degraded, "the breaker is open for every table: none of them reads L2")
	require.Zero(t, idle.Stats().Misses+idle.Stats().L2Hits, "the idle table was not read")

	require.NoError(t, srv.Continue())
	stopped = false
	read.Kick()
	// The reconcile leaves degraded mode table by table, so the read table can be seen settled
	// a moment before the idle one; with neither a reconcile interval nor a probe to come, only
	// the kicked reconcile can settle the idle table.
	valkeytest.Eventually(t, 10*time.Second, "the reconcile that closed the breaker settled the idle table too",
		func() bool { return !read.Stats().Degraded && !idle.Stats().Degraded })
	_, err = idle.Get(ctx, "k")
	require.NoError(t, err)
	st := idle.Stats()
	require.Equal(t, int64(1), st.Misses, "the idle table reads L2 again")
	require.Zero(t, st.DegradedLoads, "and not in degraded mode")
}
