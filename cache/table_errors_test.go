package cache_test

import (
	"context"
	"errors"
	"math"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/tables"
)

// TestNewTableErrors: a bad spec, a duplicate name and a nil loader are refused; a refused
// name can be declared again.
func TestNewTableErrors(t *testing.T) {
	t.Parallel()
	c := newCache(t, targets[0].client(t))
	src := &source{}
	name := tableName(t)
	_, err := cache.NewTable(c, tables.Spec{L2Timeout: relaxedL2, Name: "bad{name"}, src.load, nil)
	require.ErrorIs(t, err, tables.ErrInvalidSpec)
	require.ErrorIs(t, err, keys.ErrInvalid)
	_, err = cache.NewTable(c, tables.Spec{L2Timeout: relaxedL2, Name: name, Jitter: 1.5}, src.load, nil)
	require.ErrorIs(t, err, tables.ErrInvalidSpec)
	_, err = cache.NewTable[string, user](c, tables.Spec{L2Timeout: relaxedL2, Name: name}, nil, nil)
	require.ErrorContains(t, err, "nil loader")

	_, err = cache.NewTable(c, tables.Spec{L2Timeout: relaxedL2, Name: name}, src.load, nil)
	require.NoError(t, err)
	_, err = cache.NewTable(c, tables.Spec{L2Timeout: relaxedL2, Name: name}, src.load, nil)
	require.ErrorIs(t, err, tables.ErrDuplicate)
	require.Len(t, c.Tables(), 1)
	require.Contains(t, c.Stats(), name)

	other := newCache(t, targets[0].client(t))
	_, err = cache.NewTable(other, tables.Spec{L2Timeout: relaxedL2, Name: name}, src.load, nil)
	require.NoError(t, err, "declarations belong to their cache object")
}

// TestNewTableL1MaxEntriesBound: an L1MaxEntries whose counter sizing would overflow is
// refused by NewTable with an error, where ristretto would panic or refuse obscurely.
func TestNewTableL1MaxEntriesBound(t *testing.T) {
	t.Parallel()
	c := newCache(t, targets[0].client(t))
	src := &source{}
	for _, n := range []int64{tables.MaxL1MaxEntries + 1, 1 << 59, math.MaxInt64} {
		_, err := cache.NewTable(c, tables.Spec{L2Timeout: relaxedL2, Name: tableName(t), L1MaxEntries: n}, src.load, nil)
		require.ErrorIs(t, err, tables.ErrInvalidSpec, "%d", n)
		require.ErrorContains(t, err, "L1MaxEntries")
		require.ErrorContains(t, err, strconv.FormatInt(tables.MaxL1MaxEntries, 10))
	}
	require.Empty(t, c.Tables())
}

// TestClosed: after Close, reads that need the network and new tables answer ErrClosed.
func TestClosed(t *testing.T) {
	t.Parallel()
	client := targets[0].client(t)
	c, err := cache.New(client, cache.Config{})
	require.NoError(t, err)
	src := &source{}
	tbl := newTable(t, c, tables.Spec{L2Timeout: relaxedL2}, src)
	c.Close()
	c.Close()
	_, err = tbl.Get(context.Background(), "k")
	require.ErrorIs(t, err, cache.ErrClosed)
	_, err = tbl.GetMany(context.Background(), []string{"a", "b"})
	require.ErrorIs(t, err, cache.ErrClosed)
	_, err = cache.NewTable(c, tables.Spec{L2Timeout: relaxedL2, Name: tableName(t) + "x"}, src.load, nil)
	require.ErrorIs(t, err, cache.ErrClosed)
	require.Zero(t, src.calls.Load())
}

// TestL2Unavailable: a caller that gave up before L2 answered gets its own error
// (context.Canceled), not an L2 failure, not a panic and not a loader call.
func TestL2Unavailable(t *testing.T) {
	t.Parallel()
	client := targets[0].client(t)
	src := &source{}
	tbl := newTable(t, newCache(t, client), tables.Spec{L2Timeout: relaxedL2}, src)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := tbl.Get(ctx, "k")
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, cache.ErrL2, "the caller's cancellation is not an L2 failure")
	require.False(t, errors.Is(err, cache.ErrNotFound))
	require.Zero(t, src.calls.Load())
}
