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

// TestGetManyWriteTimeoutIsOneBreakerFailure: the breaker opens after BreakerFailures (3) L2
// failures in a row, and a GetMany's MGET and lease pipelines count once each, however many
// ids they carry. Its write pipeline (one round trip of cache_fill calls) counts once per key:
// one write round trip that outlasts L2Timeout opens the breaker at once, and every table of
// the cache goes to degraded mode. Here the server is paused (SIGSTOP) while the batch loader
// runs, so the one write round trip of a GetMany of 5 ids times out; then it resumes. One
// failed round trip must not open the breaker.
// (It is the mechanism of most cache TestGetManyChunks failures under load: a 1,000-row write
// pipeline over the default 250 ms opened the breaker, and the next chunks were answered by
// the degraded loader.)
func TestGetManyWriteTimeoutIsOneBreakerFailure(t *testing.T) {
	ctx := context.Background()
	srv := valkeytest.Start(t, valkeytest.WithoutPersistence())
	// No reconcile during the test (it would read the records while the server is paused).
	c, err := cache.New(srv.Client(t), cache.Config{ReconcileInterval: time.Hour, BreakerFailures: 3, StatsInterval: -1})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	paused := false
	t.Cleanup(func() {
		if paused {
			_ = srv.Continue()
		}
	})
	tbl, err := cache.NewTable(c, tables.Spec{Name: valkeytest.TestName(t), L2Timeout: 300 * time.Millisecond},
		func(_ context.Context, id string) (string, error) { return "one-" + id, nil },
		&cache.TableOpts[string, string]{BatchLoad: func(_ context.Context, ids []string) (map[string]string, error) {
			// The reads and the leases are done; the write pipeline comes next.
			require.NoError(t, srv.Stop())
			paused = true
			out := make(map[string]string, len(ids))
			for _, id := range ids {
				out[id] = "batch-" + id
			}
			return out, nil
		}})
	require.NoError(t, err)

	got, err := tbl.GetMany(ctx, []string{"a", "b", "c", "d", "e"})
	require.NoError(t, err, "the values are good; only their write failed")
	require.Len(t, got, 5)
	require.NoError(t, srv.Continue())
	paused = false

	st := tbl.Stats()
	require.Zero(t, st.BreakerOpens, "one write round trip that timed out is one L2 failure, not one per row")
	require.False(t, st.Degraded)
}
