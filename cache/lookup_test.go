package cache_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/tables"
)

// TestLookupTiers: Lookup names the tier that answered, in step with the stats.
func TestLookupTiers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := &source{gone: map[string]bool{"7": true}}
	tbl := newTable(t, newCache(t, valkeytest.Shared(t).Client(t)), tables.Spec{L2Timeout: relaxedL2}, src)

	for i, want := range []cache.Tier{cache.TierFill, cache.TierL1} {
		u, tier, err := tbl.Lookup(ctx, "42")
		require.NoError(t, err)
		require.Equal(t, "name-42", u.Name)
		require.Equal(t, want, tier, "read %d", i)
	}
	tbl.Forget("42")
	_, tier, err := tbl.Lookup(ctx, "42")
	require.NoError(t, err)
	require.Equal(t, cache.TierL2, tier)
	require.Equal(t, "l2", tier.String())

	_, tier, err = tbl.Lookup(ctx, "7")
	require.ErrorIs(t, err, cache.ErrNotFound)
	require.Equal(t, cache.TierFill, tier)
	_, tier, err = tbl.Lookup(ctx, "7")
	require.ErrorIs(t, err, cache.ErrNotFound)
	require.Equal(t, cache.TierL1, tier, "a remembered not-found is an L1 answer")

	st := tbl.Stats()
	require.Equal(t, int64(2), st.L1Hits)
	require.Equal(t, int64(1), st.L2Hits)
	require.Equal(t, int64(2), st.Loads)
}
