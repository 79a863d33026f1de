package cache_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"
	"go.uber.org/goleak"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/tables"
)

// TestCloseLeavesNoGoroutines: after a cache that filled, hit, refreshed early and flushed is
// closed (and its client), none of its goroutines remain: not the clock's ticker, not
// ristretto's, not a fill's or a refresh's. It runs sequentially, before the parallel tests,
// so that their goroutines are not counted.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	addr := valkeytest.Shared(t).Addr
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	client, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	require.NoError(t, err)
	defer client.Close()
	c, err := cache.New(client, cache.Config{})
	require.NoError(t, err)
	defer c.Close()
	ctx := context.Background()
	// A 1 ms load on a 50 ms row: the early-refresh window opens almost at once.
	tbl, err := cache.NewTable(c, tables.Spec{L2Timeout: relaxedL2, Name: tableName(t), TTL: 50 * time.Millisecond, Jitter: tables.Off, EarlyRefreshBeta: 5},
		func(ctx context.Context, id string) (string, error) {
			time.Sleep(time.Millisecond)
			return "v-" + id, nil
		}, nil)
	require.NoError(t, err)
	for range 3 {
		for _, id := range []string{"a", "b", "c"} {
			_, err := tbl.Get(ctx, id)
			require.NoError(t, err)
		}
		_, err = tbl.GetMany(ctx, []string{"a", "d", "e"})
		require.NoError(t, err)
		tbl.ForgetAll()
	}
	// Reads of a row in its window start the refresh; the test exercises one.
	valkeytest.Eventually(t, 2*time.Second, "a background refresh", func() bool {
		_, _ = tbl.Get(ctx, "a")
		return tbl.Stats().EarlyRefreshes > 0
	})
}
