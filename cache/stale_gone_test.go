package cache_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/tables"
)

// TestStaleValueGoneDuringItsWait: a Get of a stale-on-error table with a stale value at hand
// waits StaleTimeout for L2 and the loader. When the stale value cannot be served once that
// wait is over (it left the StaleOnError window meanwhile, or was invalidated), the Get goes
// on as any Get does (degraded mode, the fill in flight): the stale timeout is the table's,
// not the caller's deadline, and must not come back as context.DeadlineExceeded to a caller
// that set none.
func TestStaleValueGoneDuringItsWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("outage outlasting StaleOnError", func(t *testing.T) {
		t.Parallel()
		if testing.Short() {
			t.Skip("stops a dedicated server")
		}
		srv := valkeytest.Start(t)
		truth := newDB()
		const (
			staleFor  = 2 * time.Second
			staleWait = time.Second
			l2Timeout = time.Second // as by default, no longer than the stale timeout
		)
		spec := tables.Spec{Name: tableName(t), L1TTL: 50 * time.Millisecond, StaleOnError: staleFor, StaleTimeout: staleWait, L2Timeout: l2Timeout}
		tbl, err := cache.NewTable(newCache(t, srv.Client(t)), spec, truth.load, nil)
		require.NoError(t, err)
		fetched := time.Now()
		_, err = tbl.Get(ctx, "k")
		require.NoError(t, err)
		require.NoError(t, srv.Stop())
		t.Cleanup(func() { _ = srv.Continue() })
		// Halfway through the wait's overlap with the window's end: the stale value is at
		// hand when the Get begins, and too old when its wait is over.
		time.Sleep(time.Until(fetched.Add(staleFor - staleWait/2)))
		start := time.Now()
		v, tier, err := tbl.Lookup(ctx, "k")
		t.Logf("Lookup after %v: %v, %v, %v", time.Since(start), v, tier, err)
		require.NoError(t, err, "degraded mode answers once no stale value is left")
		require.Equal(t, cache.TierDegraded, tier)
		require.Equal(t, 0, v)
	})

	t.Run("invalidated during a slow load", func(t *testing.T) {
		t.Parallel()
		client := valkeytest.Shared(t).Client(t)
		var slow atomic.Bool
		load := func(ctx context.Context, id string) (int, error) {
			if slow.Load() {
				select {
				case <-time.After(3 * time.Second):
				case <-ctx.Done():
					return 0, ctx.Err()
				}
			}
			return 1, nil
		}
		spec := tables.Spec{Name: tableName(t), L1TTL: 50 * time.Millisecond, StaleOnError: time.Minute, StaleTimeout: 500 * time.Millisecond, L2Timeout: relaxedL2}
		reader, err := cache.NewTable(newCache(t, client), spec, load, nil)
		require.NoError(t, err)
		writer, err := cache.NewTable(newCache(t, client), spec, load, nil)
		require.NoError(t, err)
		_, err = reader.Get(ctx, "k")
		require.NoError(t, err)
		time.Sleep(2 * spec.L1TTL)                                                                       // the entry expires: it is the stale value at hand
		require.NoError(t, client.Do(ctx, client.B().Del().Key(rowKey(t, reader, "k")).Build()).Error()) // the row expired too
		slow.Store(true)
		joined := make(chan struct{}, 1)
		reader.SetHookJoined(func(string) {
			select {
			case joined <- struct{}{}:
			default:
			}
		})
		type result struct {
			v   int
			err error
		}
		done := make(chan result, 1)
		go func() {
			v, err := reader.Get(ctx, "k")
			done <- result{v, err}
		}()
		recv(t, joined, 10*time.Second) // the Get waits for the slow fill, its stale value at hand
		require.NoError(t, writer.Set(ctx, "k", 2))
		r := recv(t, done, 10*time.Second)
		t.Logf("Get: %v, %v", r.v, r.err)
		require.False(t, errors.Is(r.err, context.DeadlineExceeded), "the caller set no deadline: %v", r.err)
		require.NoError(t, r.err)
		require.Equal(t, 2, r.v, "the row the Set wrote")
	})
}
