package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/lua"
)

// TestLaneUrgentOfCappedLaneStarves: lane A is at its cap with more urgent jobs waiting than
// one claim visits (count + 64); lane B has an ordinary job. B's job is the only one any lane
// may give, so a claim takes it (EnqueueOpts.Priority: a higher priority goes first only over
// a job "whose lane could give it"). The urgent jobs of A must not use up the claim's bound.
func TestLaneUrgentOfCappedLaneStarves(t *testing.T) {
	t.Parallel()
	ctx, c, b, name, q := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	require.NoError(t, b.SetLaneLimits(ctx, name, "a", bus.LaneLimits{Cap: 1}))
	enqueueLane(t, b, name, "a", 0, 1, "a")
	require.Equal(t, "a", lanesOf(claimN(t, b, name, 1)), "a is at its cap")
	enqueueLane(t, b, name, "a", 1, 70, "urgent-a")
	bb := enqueueLane(t, b, name, "b", 0, 1, "b")

	// The worker's claim: laneclaim. With nothing claimed, a wait_ms of 0 means "claim again
	// now": a worker answered so, again and again, polls while b starves.
	res, err := lua.Get("laneclaim").Exec(ctx, c, laneclaimKeys(q), []string{"60000", "1", "0"}).ToArray()
	require.NoError(t, err)
	wait, err := res[1].AsInt64()
	require.NoError(t, err)
	require.Len(t, res, 5+4, "b's job, the one job a lane may give (wait_ms %d)", wait)
	id, err := res[5].ToString()
	require.NoError(t, err)
	require.Equal(t, bb[0].String(), id)

	// Bus.Claim, the same.
	bb = enqueueLane(t, b, name, "b", 0, 1, "b2")
	jobs := claimN(t, b, name, 1)
	require.Len(t, jobs, 1)
	require.Equal(t, bb[0], jobs[0].ID)
}

// TestLaneUrgentOfRatedLaneWait: the only waiting job is an urgent job of a lane its rate
// holds back. laneclaim's wait_ms names the moment that lane may give work (FORMAT lanes,
// REPLY), so that an idle worker sleeps until then; -1 ("nothing is held") leaves the worker
// asleep on the wake list until WakeTimeout, since no script pushes a marker for a rate.
func TestLaneUrgentOfRatedLaneWait(t *testing.T) {
	t.Parallel()
	ctx, c, b, name, q := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	require.NoError(t, b.SetLaneLimits(ctx, name, "r", bus.LaneLimits{Rate: bus.Rate{Limit: 1, Per: 2 * time.Second}}))
	enqueueLane(t, b, name, "r", 2, 2, "r")
	res, err := lua.Get("laneclaim").Exec(ctx, c, laneclaimKeys(q), []string{"60000", "2", "0"}).ToArray()
	require.NoError(t, err)
	require.Len(t, res, 5+4, "the rate gives one claim now")
	wait, err := res[1].AsInt64()
	require.NoError(t, err)
	require.Greater(t, wait, int64(0), "wait_ms: the lane's rate holds its second urgent job back for about 2 s")
	require.LessOrEqual(t, wait, int64(2000))
}

// TestLaneResumeUrgentWakes: resuming a paused lane whose waiting jobs are all urgent wakes an
// idle worker (lanepause: "pushes one wake marker" when the lane has waiting jobs), as it does
// for a lane whose jobs are of priority 0.
func TestLaneResumeUrgentWakes(t *testing.T) {
	t.Parallel()
	ctx, c, b, name, q := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	require.NoError(t, b.PauseLane(ctx, name, "p"))
	enqueueLane(t, b, name, "p", 3, 1, "p")
	require.Empty(t, claimN(t, b, name, 1), "the lane is paused")
	require.NoError(t, c.Do(context.Background(), c.B().Del().Key(q.Wake()).Build()).Error())
	require.NoError(t, b.ResumeLane(ctx, name, "p"))
	n, err := c.Do(ctx, c.B().Llen().Key(q.Wake()).Build()).AsInt64()
	require.NoError(t, err)
	require.Positive(t, n, "a wake marker for the resumed lane's waiting job")
}
