package bus_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
)

// TestLanePausedRetireRejoins: a lane at its cap of 1 left laneready with a second job
// waiting; the queue is paused and the running job is completed through CompleteAndClaim,
// laneclaim's retire path (the worker's, too, when its round trip meets the pause). The freed
// lane rejoins laneready, so after Resume its second job is claimed; it used to be in neither
// laneready nor lanewait, and its jobs were never claimed again.
func TestLanePausedRetireRejoins(t *testing.T) {
	t.Parallel()
	ctx, c, b, name, q := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	require.NoError(t, b.SetLaneLimits(ctx, name, "a", bus.LaneLimits{Cap: 1}))
	opts := &bus.EnqueueOpts{Lane: "a"}
	_, err := b.Enqueue(ctx, name, []byte("1"), opts)
	require.NoError(t, err)
	second, err := b.Enqueue(ctx, name, []byte("2"), opts)
	require.NoError(t, err)
	jobs, err := b.Claim(ctx, name, &bus.ClaimOpts{Count: 5})
	require.NoError(t, err)
	require.Len(t, jobs, 1, "the cap holds the lane to one")

	require.NoError(t, b.Pause(ctx, name))
	_, err = b.CompleteAndClaim(ctx, jobs[0], nil)
	require.ErrorIs(t, err, bus.ErrPaused)
	ready, err := c.Do(ctx, c.B().Zrange().Key(q.LaneReady()).Min("0").Max("-1").Build()).AsStrSlice()
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, ready, "the freed lane is back in laneready")

	require.NoError(t, b.Resume(ctx, name))
	jobs, err = b.Claim(ctx, name, &bus.ClaimOpts{Count: 5})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.Equal(t, second.ID, jobs[0].ID)
}

// TestRateLimitedZeroWakes: RateLimited with no delay hands the job back claimable at once:
// like a snooze of 0 it pushes a wake marker, so idle workers of the queue claim it now. A
// lane its cap had taken out of laneready is back in it. While a hold runs, nothing is pushed.
func TestRateLimitedZeroWakes(t *testing.T) {
	t.Parallel()
	ctx, c, b, name, q := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	require.NoError(t, b.SetLaneLimits(ctx, name, "a", bus.LaneLimits{Cap: 1}))
	for range 2 {
		_, err := b.Enqueue(ctx, name, []byte("x"), &bus.EnqueueOpts{Lane: "a"})
		require.NoError(t, err)
	}
	markers := func() int64 {
		n, err := c.Do(ctx, c.B().Llen().Key(q.Wake()).Build()).AsInt64()
		require.NoError(t, err)
		return n
	}
	claimOne := func() bus.Job {
		jobs, err := b.Claim(ctx, name, &bus.ClaimOpts{Count: 5})
		require.NoError(t, err)
		require.Len(t, jobs, 1, "the cap holds the lane to one")
		return jobs[0]
	}
	j := claimOne()
	require.NoError(t, c.Do(ctx, c.B().Del().Key(q.Wake()).Build()).Error())
	_, err := b.RateLimited(ctx, j, 0, nil)
	require.NoError(t, err)
	require.EqualValues(t, 1, markers(), "claimable at once: a wake marker")

	j = claimOne()
	require.NoError(t, c.Do(ctx, c.B().Del().Key(q.Wake()).Build()).Error())
	_, err = b.RateLimited(ctx, j, time.Minute, nil)
	require.NoError(t, err)
	require.Zero(t, markers(), "held for a minute: nothing to wake for")
}
