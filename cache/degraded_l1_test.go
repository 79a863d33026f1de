package cache_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/tables"
)

// TestDegradedServesL1FromBeforeTheOutage pins what the degraded-mode godoc says of L1
// entries taken before an outage: they are served, while the table is degraded, until their
// own deadline (min(L1TTL, the row's PTTL)), so an invalidation lost just before the outage
// costs up to that, not one reconcile interval; the first reconcile after it flushes them.
func TestDegradedServesL1FromBeforeTheOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("stops a dedicated server")
	}
	t.Parallel()
	const interval = time.Second
	ctx := context.Background()
	srv := valkeytest.Start(t)
	truth := newDB()
	cfg := cache.Config{ReconcileInterval: interval, BreakerProbe: 100 * time.Millisecond}
	spec := tables.Spec{Name: tableName(t), L2Timeout: 100 * time.Millisecond}
	ca, err := cache.New(srv.Client(t), cfg)
	require.NoError(t, err)
	t.Cleanup(ca.Close)
	a, err := cache.NewTable(ca, spec, truth.load, nil)
	require.NoError(t, err)
	cb, err := cache.New(srv.Client(t), cfg)
	require.NoError(t, err)
	t.Cleanup(cb.Close)
	var lose atomic.Bool
	cb.SetHookMessage(func(string, []byte) bool { return !lose.Load() })
	b, err := cache.NewTable(cb, spec, truth.load, nil)
	require.NoError(t, err)

	v, err := b.Get(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, 0, v)
	flushes := b.Stats().Flushes
	lose.Store(true)
	truth.bump("k")
	require.NoError(t, a.Invalidate(ctx, "k")) // its message to b is lost
	require.NoError(t, srv.Stop())
	stopped := time.Now()
	t.Cleanup(func() { _ = srv.Continue() })
	if b.Stats().Flushes != flushes {
		t.Skip("a reconcile caught the lost message before the stop")
	}
	for i := 0; b.Stats().BreakerOpens == 0; i++ {
		_, err := b.Get(ctx, "cold"+strconv.Itoa(i))
		require.NoError(t, err, "degraded mode answers")
	}
	time.Sleep(time.Until(stopped.Add(3 * interval)))
	st := b.Stats()
	require.True(t, st.Degraded)
	v, tier, err := b.Lookup(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, cache.TierL1, tier)
	require.Equal(t, 0, v, "the entry from before the outage, 3 intervals after its invalidation")

	require.NoError(t, srv.Continue())
	back := time.Now()
	valkeytest.Eventually(t, 10*time.Second, "b to drop k", func() bool {
		_, ok := cache.PeekL1(b, "k")
		return !ok
	})
	require.LessOrEqual(t, time.Since(back), interval+slack)
	v, err = b.Get(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, 1, v)
}

// TestDegradedNotFoundKeepsNegativeTTL: a degraded load's not-found lives in L1 no longer than
// NegativeTTL, as on the normal path (where the L1 entry never outlives its not-found row). It
// lived min(L1TTL, DegradedL1TTL), and an id created meanwhile answered ErrNotFound for
// seconds.
func TestDegradedNotFoundKeepsNegativeTTL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := valkeytest.Start(t, valkeytest.WithoutPersistence())
	var exists atomic.Bool
	load := func(_ context.Context, id string) (user, error) {
		if !exists.Load() {
			return user{}, cache.ErrNotFound
		}
		return user{ID: id, Name: "name-" + id}, nil
	}
	spec := tables.Spec{Name: tableName(t), L2Timeout: 100 * time.Millisecond, NegativeTTL: 50 * time.Millisecond, DegradedL1TTL: 2 * time.Second}
	tbl, err := cache.NewTable(newCache(t, srv.Client(t)), spec, load, nil)
	require.NoError(t, err)
	require.NoError(t, srv.Stop())
	t.Cleanup(func() { _ = srv.Continue() })
	_, tier, err := tbl.Lookup(ctx, "n")
	require.ErrorIs(t, err, cache.ErrNotFound)
	require.Equal(t, cache.TierDegraded, tier)
	exists.Store(true)
	time.Sleep(200 * time.Millisecond) // 4 NegativeTTLs
	_, tier, err = tbl.Lookup(ctx, "n")
	require.NoError(t, err, "the not-found outlived NegativeTTL (answered from %v)", tier)
}
