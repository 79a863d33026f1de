package bus_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
)

// TestLaneQueueLimitsRateChangeApplies: SetQueueLimits, like SetLaneLimits, starts a changed
// rate afresh. A lane that the lanes' default rate (one claim an hour) holds back, given a
// fast default, gives its next job at the next claim; so does the queue's own stream that the
// queue's rate (one claim an hour) holds back; cleared limits too. A lane with a rate of its
// own keeps its hold.
func TestLaneQueueLimitsRateChangeApplies(t *testing.T) {
	t.Parallel()
	slow := bus.Rate{Limit: 1, Per: time.Hour}
	fast := bus.Rate{Limit: 1000}
	for _, tc := range []struct {
		name     string
		from, to bus.QueueLimits
		lane     string
	}{
		{"lane default raised", bus.QueueLimits{Lanes: bus.LaneLimits{Rate: slow}}, bus.QueueLimits{Lanes: bus.LaneLimits{Rate: fast}}, "slow"},
		{"lane default cleared", bus.QueueLimits{Lanes: bus.LaneLimits{Rate: slow}}, bus.QueueLimits{}, "slow"},
		{"lane default burst", bus.QueueLimits{Lanes: bus.LaneLimits{Rate: slow}}, bus.QueueLimits{Lanes: bus.LaneLimits{Rate: bus.Rate{Limit: 1, Per: time.Hour, Burst: 5}}}, "slow"},
		{"queue raised, no lane", bus.QueueLimits{Rate: slow}, bus.QueueLimits{Rate: fast}, ""},
		{"queue cleared, no lane", bus.QueueLimits{Rate: slow}, bus.QueueLimits{Lanes: bus.LaneLimits{Cap: 5}}, ""},
		{"queue raised, lane", bus.QueueLimits{Rate: slow}, bus.QueueLimits{Rate: fast}, "l"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, c, b, name, q := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
			require.NoError(t, b.SetQueueLimits(ctx, name, tc.from))
			enqueueLane(t, b, name, tc.lane, 0, 3, "s")
			require.Len(t, claimN(t, b, name, 3), 1, "one claim an hour")
			require.Empty(t, claimN(t, b, name, 3), "held")
			require.NoError(t, c.Do(ctx, c.B().Del().Key(q.Wake()).Build()).Error())
			require.NoError(t, b.SetQueueLimits(ctx, name, tc.to))
			n, err := c.Do(ctx, c.B().Llen().Key(q.Wake()).Build()).AsInt64()
			require.NoError(t, err)
			require.Positive(t, n, "a wake marker: the released work may be claimed now")
			require.NotEmpty(t, claimN(t, b, name, 1), "the new limits apply from the next claim")
		})
	}
	t.Run("own rate kept", func(t *testing.T) {
		t.Parallel()
		ctx, _, b, name, _ := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
		require.NoError(t, b.SetQueueLimits(ctx, name, bus.QueueLimits{Lanes: bus.LaneLimits{Rate: slow}}))
		require.NoError(t, b.SetLaneLimits(ctx, name, "own", bus.LaneLimits{Cap: 10, Rate: slow}))
		require.NoError(t, b.SetLaneLimits(ctx, name, "def", bus.LaneLimits{Cap: 10}))
		enqueueLane(t, b, name, "own", 0, 2, "o")
		enqueueLane(t, b, name, "def", 0, 2, "d")
		require.Equal(t, "def own", sortedLanes(claimN(t, b, name, 4)))
		require.NoError(t, b.SetQueueLimits(ctx, name, bus.QueueLimits{Lanes: bus.LaneLimits{Rate: fast}}))
		require.Equal(t, "def", lanesOf(claimN(t, b, name, 4)), "own keeps its own rate's hold")
	})
	t.Run("claims in the change's millisecond count", func(t *testing.T) {
		// The log entries of lanesince's own millisecond are forgotten (one of them could be the
		// old rate's), so the claims the new rate makes in it are logged as of the next one and
		// count. lanesince is set a minute ahead here, a stand-in for that millisecond: a burst
		// of 5 is 5 claims however they are split, here 2 (all that waited) and then 3.
		t.Parallel()
		ctx, c, b, name, q := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
		require.NoError(t, b.SetQueueLimits(ctx, name, bus.QueueLimits{Lanes: bus.LaneLimits{Rate: bus.Rate{Limit: 1, Per: time.Hour, Burst: 5}}}))
		require.NoError(t, c.Do(ctx, c.B().Hset().Key(q.Flow()).FieldValue().FieldValue("lanesince", strconv.FormatInt(serverMillis(t, c)+60_000, 10)).Build()).Error())
		enqueueLane(t, b, name, "x", 0, 2, "x")
		require.Len(t, claimN(t, b, name, 10), 2, "all that waited")
		enqueueLane(t, b, name, "x", 0, 10, "y")
		require.Len(t, claimN(t, b, name, 10), 3, "the rest of the burst")
	})
	t.Run("lane in no set", func(t *testing.T) {
		// A lane whose one job was claimed and completed, and that a later claim found empty,
		// is in no set (not ready, not held, none claimed, no limits of its own); its log of
		// the old default rate must not hold its next job back either.
		t.Parallel()
		ctx, c, b, name, q := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
		require.NoError(t, b.SetQueueLimits(ctx, name, bus.QueueLimits{Lanes: bus.LaneLimits{Rate: bus.Rate{Limit: 1, Per: time.Hour, Burst: 2}}}))
		enqueueLane(t, b, name, "idle", 0, 1, "i")
		jobs := claimN(t, b, name, 1)
		require.Len(t, jobs, 1)
		require.NoError(t, b.Complete(ctx, jobs[0], nil))
		require.Empty(t, claimN(t, b, name, 1))
		for _, k := range []string{q.LaneReady(), q.LaneWait()} {
			n, err := c.Do(ctx, c.B().Zcard().Key(k).Build()).AsInt64()
			require.NoError(t, err)
			require.Zero(t, n, k)
		}
		require.NoError(t, b.SetQueueLimits(ctx, name, bus.QueueLimits{Lanes: bus.LaneLimits{Rate: fast}}))
		enqueueLane(t, b, name, "idle", 0, 1, "i2")
		require.Len(t, claimN(t, b, name, 1), 1, "the new default applies from the next claim")
	})
}

// sortedLanes is lanesOf in byte order.
func sortedLanes(jobs []bus.Job) string {
	out := lanesOf(jobs)
	if out == "own def" {
		return "def own"
	}
	return out
}
