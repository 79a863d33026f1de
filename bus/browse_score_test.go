package bus_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
)

// TestBrowseScheduleFarRunAt: a run-at is server TIME plus a delay of up to 15 digits of ms, so
// a job scheduled far ahead (by a producer that passes the script's largest delay_ms) has a
// score past 999999999999999. Paging the schedule across it, both ways, passes that score
// back as the cursor, and every job is listed once, in order.
func TestBrowseScheduleFarRunAt(t *testing.T) {
	t.Parallel()
	ctx, c, b, name, q := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	near, err := b.Enqueue(ctx, name, []byte("near"), &bus.EnqueueOpts{Delay: time.Hour})
	require.NoError(t, err)
	latestAt, err := b.Enqueue(ctx, name, []byte("at"), &bus.EnqueueOpts{At: time.UnixMilli(lua.MaxUint)})
	require.NoError(t, err)
	far := []keys.JobID{keys.NewJobID(), keys.NewJobID()}
	args := []string{"0", strings.Repeat("9", 15), "0", "0"}
	for _, id := range far {
		args = append(args, id.String(), "far", "")
	}
	require.NoError(t, lua.Get("enqueue").Exec(ctx, c, []string{q.Pending(), q.Schedule(), q.Meta(), q.Wake()}, args).Error())

	want := zsetEntries(t, c, q.Schedule())
	require.Equal(t, []keys.JobID{near.ID, latestAt.ID, far[0], far[1]}, idsOf(want))
	for _, e := range want[2:] {
		require.Greater(t, e.At.UnixMilli(), int64(lua.MaxUint), "scheduled past the largest at_ms")
	}
	for _, newest := range []bool{false, true} {
		got, pages := browseAll(t, b, name, keys.Schedule, newest, 1)
		require.Equal(t, 4, pages)
		order := slices.Clone(want)
		if newest {
			slices.Reverse(order)
		}
		require.Equal(t, idsOf(order), idsOf(got), "newest %v", newest)
		for i := range got {
			require.Equal(t, order[i].At.UnixMilli(), got[i].At.UnixMilli(), "newest %v: %s", newest, got[i].ID)
		}
	}
}

func idsOf(es []bus.Entry) []keys.JobID {
	out := make([]keys.JobID, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}
