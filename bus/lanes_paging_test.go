package bus_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
)

// laneclaimOnce runs one laneclaim of count jobs on q and returns the lanes of the claimed
// jobs as turns (turnsOf) and the reply's wait_ms.
func laneclaimOnce(t *testing.T, c valkey.Client, q keys.Queue, count string) (string, int64) {
	t.Helper()
	res, err := lua.Get("laneclaim").Exec(t.Context(), c, laneclaimKeys(q), []string{"60000", count, "0"}).ToArray()
	require.NoError(t, err)
	wait, err := res[1].AsInt64()
	require.NoError(t, err)
	var jobs []bus.Job
	for i := 5; i+3 < len(res); i += 4 {
		lane, err := res[i+3].ToString()
		require.NoError(t, err)
		jobs = append(jobs, bus.Job{Lane: lane})
	}
	return turnsOf(jobs), wait
}

// TestLaneClaimPagesKeepServedLanes: laneclaim reads laneready a page at a time (count/32 + 2
// lanes). A lane whose turn lifts its score past the last lane of a full page waits for the
// next page, and is served again once it shows where the lane goes, here after the last page
// came back empty: a, b and c give their one job, d its turn of 32 and then the 5 the claim
// still needs.
func TestLaneClaimPagesKeepServedLanes(t *testing.T) {
	t.Parallel()
	_, c, b, name, q := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	for _, l := range []string{"a", "b", "c"} {
		enqueueLane(t, b, name, l, 0, 1, l)
	}
	enqueueLane(t, b, name, "d", 0, 100, "d")
	turns, _ := laneclaimOnce(t, c, q, "40") // pages of 4 lanes: a full first page
	require.Equal(t, "a×1 b×1 c×1 d×37", turns)
}

// TestLaneClaimQueueRateWaitAcrossPages: the queue's rate (5 claims in 10 s, bursts of 5) ends
// c's turn after the first page's lanes; c, past the page, is visited again and found held by
// the queue's rate, so the reply's wait_ms names when that rate frees instead of -1 ("nothing
// is held", which would leave the worker to its WakeTimeout).
func TestLaneClaimQueueRateWaitAcrossPages(t *testing.T) {
	t.Parallel()
	ctx, c, b, name, q := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	require.NoError(t, b.SetQueueLimits(ctx, name, bus.QueueLimits{Rate: bus.Rate{Limit: 5, Per: 10 * time.Second, Burst: 5}}))
	enqueueLane(t, b, name, "a", 0, 1, "a")
	enqueueLane(t, b, name, "b", 0, 1, "b")
	enqueueLane(t, b, name, "c", 0, 10, "c")
	turns, wait := laneclaimOnce(t, c, q, "10") // pages of 3 lanes
	require.Equal(t, "a×1 b×1 c×3", turns)
	require.Greater(t, wait, int64(0), "the queue's rate holds c's jobs")
	require.LessOrEqual(t, wait, int64(10_000))
}
