package cache_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/tables"
)

// TestKickedReconcileSendsEveryTablesPending: while the breaker is open, table b refuses an
// invalidation (remembered, pending). Once Valkey answers again, a reconcile kicked for
// table a alone (its record went back in time) closes the breaker; b's pending invalidation
// must go out before b's reads return to L2, not at the next tick, or b serves from L2 the
// row the database no longer has.
func TestKickedReconcileSendsEveryTablesPending(t *testing.T) {
	if testing.Short() {
		t.Skip("stops a dedicated server")
	}
	t.Parallel()
	ctx := context.Background()
	srv := valkeytest.Start(t)
	admin := srv.Client(t)
	truth := newDB()
	// No tick and no probe within the test: only the kick reconciles.
	cfg := cache.Config{ReconcileInterval: time.Minute, BreakerProbe: 30 * time.Second}
	c, err := cache.New(srv.Client(t), cfg)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	spec := tables.Spec{L2Timeout: 100 * time.Millisecond}
	specA, specB := spec, spec
	specA.Name, specB.Name = tableName(t), tableName(t)
	a, err := cache.NewTable(c, specA, truth.load, nil)
	require.NoError(t, err)
	b, err := cache.NewTable(c, specB, truth.load, nil)
	require.NoError(t, err)
	// Another process writing to a.
	c2, err := cache.New(srv.Client(t), cfg)
	require.NoError(t, err)
	t.Cleanup(c2.Close)
	a2, err := cache.NewTable(c2, specA, truth.load, nil)
	require.NoError(t, err)
	require.NoError(t, a2.Set(ctx, "x", 1))
	valkeytest.Eventually(t, 10*time.Second, "a to hear a2's write", func() bool { return a.Stats().InvalidationsReceived == 1 })

	v, err := b.Get(ctx, "k") // the row holds 0
	require.NoError(t, err)
	require.Equal(t, 0, v)
	b.Forget("k") // the next read of k goes to L2
	truth.bump("k")

	require.NoError(t, srv.Stop())
	stopped := true
	t.Cleanup(func() {
		if stopped {
			_ = srv.Continue()
		}
	})
	for i := 0; a.Stats().BreakerOpens == 0; i++ {
		_, err := a.Get(ctx, "cold"+strconv.Itoa(i))
		require.NoError(t, err, "degraded mode answers")
	}
	require.ErrorIs(t, b.Invalidate(ctx, "k"), cache.ErrL2)
	require.Equal(t, 1, b.Stats().PendingInvalidations)
	require.True(t, a.Stats().Degraded)
	require.NoError(t, srv.Continue())
	stopped = false

	// a's record goes back one write (as after a restore); a2's next write then repeats a
	// seq that c saw, with another token: a regression, which kicks a reconcile of a alone.
	require.NoError(t, admin.Do(ctx, admin.B().Hincrby().Key(keys.MustTable(specA.Name).Record()).Field("seq").Increment(-1).Build()).Error())
	require.NoError(t, a2.Set(ctx, "x", 2))
	valkeytest.Eventually(t, 10*time.Second, "the kicked reconcile to settle a", func() bool { return !a.Stats().Degraded })

	pending := b.Stats().PendingInvalidations
	v, tier, err := b.Lookup(ctx, "k")
	require.NoError(t, err)
	require.Zero(t, pending, "b's pending invalidation was sent before the breaker closed")
	require.Equal(t, 1, v, "b read k (tier %v): the database holds 1", tier)
}
