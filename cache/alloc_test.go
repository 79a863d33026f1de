package cache_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/tables"
)

// TestL1HitAllocatesNothing: an L1 hit through Table.Get allocates nothing, for string and
// integer ids, for values and for remembered not-founds. (testing.AllocsPerRun refuses to
// run in a parallel test, so this one is sequential; it takes milliseconds.)
func TestL1HitAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	c := newCache(t, targets[0].client(t))
	spec := tables.Spec{TTL: time.Hour, L1TTL: time.Hour}

	spec.Name = tableName(t) + "s"
	strs := newTable(t, c, spec, &source{gone: map[string]bool{"ghost": true}})
	spec.Name = tableName(t) + "i"
	ints, err := cache.NewTable(c, spec, func(_ context.Context, id int64) (user, error) {
		return user{ID: "int", Name: "n"}, nil
	}, nil)
	require.NoError(t, err)

	_, err = strs.Get(ctx, "user-42")
	require.NoError(t, err)
	_, err = strs.Get(ctx, "ghost")
	require.ErrorIs(t, err, cache.ErrNotFound)
	_, err = ints.Get(ctx, 42)
	require.NoError(t, err)

	for _, tc := range []struct {
		name string
		get  func()
	}{
		{"string id", func() { _, _ = strs.Get(ctx, "user-42") }},
		{"not found", func() { _, _ = strs.Get(ctx, "ghost") }},
		{"int64 id", func() { _, _ = ints.Get(ctx, 42) }},
	} {
		before := strs.Stats().L1Hits + ints.Stats().L1Hits
		allocs := testing.AllocsPerRun(1000, tc.get)
		require.Zero(t, allocs, tc.name)
		require.Equal(t, before+1001, strs.Stats().L1Hits+ints.Stats().L1Hits, "%s: every call was an L1 hit", tc.name)
	}
}
