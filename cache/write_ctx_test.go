package cache_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/tables"
)

// TestWriteCallerCancelNotL2: a Set, Invalidate or InvalidateAll whose caller's context
// is already cancelled fails with the caller's context.Canceled, not with ErrL2 (ErrL2's doc:
// "A caller's own cancellation or deadline is not an L2 failure and does not wrap it"), and
// names the table.
func TestWriteCallerCancelNotL2(t *testing.T) {
	t.Parallel()
	src := &source{}
	tbl := newTable(t, newCache(t, valkeytest.Shared(t).Client(t)), tables.Spec{}, src)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for name, f := range map[string]func() error{
		"Set":           func() error { return tbl.Set(ctx, "k", user{ID: "k"}) },
		"Invalidate":    func() error { return tbl.Invalidate(ctx, "k") },
		"InvalidateAll": func() error { return tbl.InvalidateAll(ctx) },
	} {
		err := f()
		t.Logf("%s: %v", name, err)
		require.ErrorIs(t, err, context.Canceled, name)
		require.NotErrorIs(t, err, cache.ErrL2, "%s: the caller's cancellation is not an L2 failure", name)
		require.Contains(t, err.Error(), tbl.Name(), name)
	}
}
