package cache_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/tables"
)

// TestHugeLoaderTimeoutFills: a table whose LoaderTimeout is as long as a time.Duration goes
// ("no timeout to speak of") is either refused by Resolve, naming the field, or fills rows
// like any other table. Before the fix it was accepted and every miss failed: the fill's
// deadline, 2*LeaseTTL+LoaderTimeout, overflowed to a negative duration.
func TestHugeLoaderTimeoutFills(t *testing.T) {
	t.Parallel()
	client := valkeytest.Shared(t).Client(t)
	c := newCache(t, client)
	src := &source{delay: time.Millisecond} // a loader that honours its context, as a database query does
	for _, lt := range []time.Duration{math.MaxInt64, 100 * 365 * 24 * time.Hour, 50 * 365 * 24 * time.Hour} {
		tbl, err := cache.NewTable(c, tables.Spec{Name: tableName(t), L2Timeout: relaxedL2, LoaderTimeout: lt}, src.load, nil)
		if err != nil {
			require.ErrorIs(t, err, tables.ErrInvalidSpec, "LoaderTimeout %v", lt)
			require.ErrorContains(t, err, "LoaderTimeout")
			continue
		}
		v, err := tbl.Get(context.Background(), "a")
		require.NoError(t, err, "LoaderTimeout %v", lt)
		require.Equal(t, "name-a", v.Name)
		require.Equal(t, "value", cache.ParsedKind(readRaw(t, client, rowKey(t, tbl, "a"))), "the filled row is in L2")
	}
}

// TestHugeTTLKeepsL1: a table whose rows and L1 entries live as long as a time.Duration goes
// (TTL and L1TTL math.MaxInt64, no jitter: "keep everything until invalidated") serves its
// second read from L1. Before the fix the entry's deadline, clock time + min(L1TTL, the
// row's PTTL), overflowed to a negative time, so install refused every entry: L1 held
// nothing and every Get went to Valkey.
func TestHugeTTLKeepsL1(t *testing.T) {
	t.Parallel()
	client := valkeytest.Shared(t).Client(t)
	c := newCache(t, client)
	src := &source{}
	tbl := newTable(t, c, tables.Spec{L2Timeout: relaxedL2, TTL: math.MaxInt64, L1TTL: math.MaxInt64, Jitter: tables.Off}, src)
	require.Eventually(t, tbl.Synced, 5*time.Second, time.Millisecond)
	ctx := context.Background()
	time.Sleep(2 * time.Millisecond)     // the cache's clock is past the int64 headroom of the row's PTTL
	_, tier, err := tbl.Lookup(ctx, "a") // filled
	require.NoError(t, err)
	require.Equal(t, cache.TierFill, tier)
	_, tier, err = tbl.Lookup(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, cache.TierL1, tier, "the second read of a filled id")

	tbl.Forget("a")
	_, tier, err = tbl.Lookup(ctx, "a") // read from L2, with the row's PTTL
	require.NoError(t, err)
	require.Equal(t, cache.TierL2, tier)
	_, tier, err = tbl.Lookup(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, cache.TierL1, tier, "the read after an L2 read")
	require.Equal(t, int64(1), src.calls.Load())
}

// TestL1MaxEntriesAtItsBound: tables.MaxL1MaxEntries is what Resolve accepts, so NewTable
// with it either makes the table or returns an error naming L1MaxEntries, and the name can
// be declared again. Before the fix ristretto's counter allocation for it panicked
// (makeslice: len out of range) out of NewTable, leaving the name declared.
func TestL1MaxEntriesAtItsBound(t *testing.T) {
	t.Parallel()
	client := valkeytest.Shared(t).Client(t)
	c := newCache(t, client)
	src := &source{}
	name := tableName(t)
	var err error
	require.NotPanics(t, func() {
		_, err = cache.NewTable(c, tables.Spec{Name: name, L2Timeout: relaxedL2, L1MaxEntries: tables.MaxL1MaxEntries}, src.load, nil)
	})
	if err == nil {
		return
	}
	require.ErrorContains(t, err, "L1MaxEntries")
	tbl, err := cache.NewTable(c, tables.Spec{Name: name, L2Timeout: relaxedL2}, src.load, nil)
	require.NoError(t, err, "the refused declaration was undone")
	_, err = tbl.Get(context.Background(), "a")
	require.NoError(t, err)
}
