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
	// One failure opens the breaker, so the reads of the stopped server can wait out an
	// L2Timeout long enough for a healthy one under -race on a loaded machine: every read of
	// the test's records and rows is bounded by it, and one that timed out on a healthy server
	// failed the test (at 50 ms: the initial record read, the kicked reconcile's, the idle
	// table's last Get).
	c, err := cache.New(srv.Client(t), cache.Config{ReconcileInterval: time.Hour, BreakerProbe: time.Hour, BreakerFailures: 1})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	src := &source{}
	spec := tables.Spec{L2Timeout: 2 * time.Second}
	spec.Name = tableName(t) + "-read"
	read := newTable(t, c, spec, src)
	spec.Name = tableName(t) + "-idle"
	idle := newTable(t, c, spec, src)
	// With neither a reconcile interval nor a probe to come, a record read that failed is not
	// tried again by itself: the waits below kick a reconcile for as long as they wait.
	valkeytest.Eventually(t, 10*time.Second, "both tables synced", func() bool {
		if read.Synced() && idle.Synced() {
			return true
		}
		read.Kick() // a reconcile subscribes and reads the record of every table not synced
		return false
	})

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
	// The reconcile leaves degraded mode table by table, so the read table can be seen settled
	// a moment before the idle one; with neither a reconcile interval nor a probe to come, only
	// a kicked reconcile can settle the idle table. A kicked reconcile whose read of the
	// records timed out settles nothing, so the read table is kicked again for as long as it
	// is degraded (the breaker is open). Once one of them closed the breaker, a kick would
	// reconcile the read table alone: the idle table is settled by the reconcile that closed
	// the breaker, or never.
	valkeytest.Eventually(t, 10*time.Second, "the reconcile that closed the breaker settled the idle table too",
		func() bool {
			if read.Stats().Degraded {
				read.Kick()
				return false
			}
			return !idle.Stats().Degraded
		})
	_, err = idle.Get(ctx, "k")
	require.NoError(t, err)
	st := idle.Stats()
	require.Equal(t, int64(1), st.Misses, "the idle table reads L2 again")
	require.Zero(t, st.DegradedLoads, "and not in degraded mode")
}
