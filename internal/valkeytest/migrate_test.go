package valkeytest_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// TestMigrateSlot: MigrateSlot moves every key of a slot to another primary; a client made
// before the move follows it (MOVED refreshes its slot map) and reads every value back, and
// the source holds none of the slot's keys any more.
func TestMigrateSlot(t *testing.T) {
	t.Parallel()
	cl := valkeytest.StartCluster(t)
	c := cl.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n = 500
	key := func(i int) string { return "{migrate}:" + strconv.Itoa(i) }
	slot := keys.Slot(key(0))
	for i := range n {
		require.NoError(t, c.Do(ctx, c.B().Set().Key(key(i)).Value(strconv.Itoa(i)).Build()).Error())
	}
	from := cl.PrimaryForSlot(slot)
	require.NotNil(t, from)
	to := cl.OtherPrimary(slot)
	require.NotNil(t, to)

	start := time.Now()
	require.NoError(t, cl.MigrateSlot(ctx, slot, to))
	t.Logf("moved %d keys of slot %d in %v", n, slot, time.Since(start).Round(time.Millisecond))
	require.Same(t, to, cl.PrimaryForSlot(slot))
	s := strconv.Itoa(int(slot))
	count := func(srv *valkeytest.Server) string {
		v, err := srv.Do(ctx, "CLUSTER", "COUNTKEYSINSLOT", s)
		require.NoError(t, err)
		return v
	}
	require.Equal(t, "0", count(from), "the source holds none of the slot's keys")
	require.Equal(t, strconv.Itoa(n), count(to), "the target holds them all")
	for i := range n {
		v, err := c.Do(ctx, c.B().Get().Key(key(i)).Build()).ToString()
		require.NoError(t, err, "key %d after the move", i)
		require.Equal(t, strconv.Itoa(i), v)
	}
	require.NoError(t, c.Do(ctx, c.B().Set().Key(key(n)).Value("new").Build()).Error(), "a write after the move")
	require.Equal(t, strconv.Itoa(n+1), count(to))

	// Back again, and a move to the owner does nothing.
	require.NoError(t, cl.MigrateSlot(ctx, slot, from))
	require.NoError(t, cl.MigrateSlot(ctx, slot, from))
	require.Equal(t, strconv.Itoa(n+1), count(from))
	v, err := c.Do(ctx, c.B().Get().Key(key(n)).Build()).ToString()
	require.NoError(t, err)
	require.Equal(t, "new", v)
	require.Error(t, valkeytest.SharedCluster(t).MigrateSlot(ctx, slot, to), "refused on the shared cluster")
}
