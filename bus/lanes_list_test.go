package bus_test

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// TestListLanesLimit: ListLanes's Limit bounds the page of every set, as LanesOpts.Limit
// says, and paging by Next still lists every lane once.
func TestListLanesLimit(t *testing.T) {
	t.Parallel()
	ctx, _, b, name, _ := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	const lanes = 30
	for i := range lanes {
		require.NoError(t, b.SetLaneLimits(ctx, name, "l"+strconv.Itoa(i), bus.LaneLimits{Cap: 1}))
	}
	seen := map[string]int{}
	opts := &bus.LanesOpts{Set: keys.Lanes, Limit: 5}
	for range 100 {
		p, err := b.ListLanes(ctx, name, opts)
		require.NoError(t, err)
		require.LessOrEqual(t, len(p.Lanes), 5, "a page of at most Limit lanes")
		for _, l := range p.Lanes {
			seen[l]++
		}
		if p.Next == "" {
			break
		}
		opts.Cursor = p.Next
	}
	require.Len(t, seen, lanes)
}
