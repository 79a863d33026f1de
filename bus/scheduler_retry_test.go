package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// TestSchedulerRetriesFailedFire: a pass whose fire the server refuses for a passing
// reason (here OOM: the reads of the pass succeed, the fire's write is refused) must come back
// soon, not sleep until the schedule's next tick (or the next refresh of the index): a
// MissedLatest schedule would otherwise lose the tick (the next pass sees two due and fires
// only the newest), a MissedSkip one both.
func TestSchedulerRetriesFailedFire(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Start(t, valkeytest.WithoutPersistence())
	c := srv.Client(t)
	ctx := context.Background()
	name := valkeytest.TestName(t)
	q := keys.MustQueue(name)
	b := newBus(t, c, bus.Config{})
	const every = time.Hour
	require.NoError(t, b.DeclarePeriodic(ctx, name, bus.Periodic{Name: "p", Every: every, Payload: []byte("x")}))
	// One tick is due: the newest multiple of the hour, with last just before it.
	now := serverMillis(t, c)
	tick := now / every.Milliseconds() * every.Milliseconds()
	setLast(t, c, q, "p", tick-1)

	// A Refresh as long as the period (a deployment whose schedules rarely change): the index
	// read does not bound the sleep.
	s := newScheduler(t, b, bus.SchedulerConfig{Queue: name, Refresh: every})
	oom := true
	s.SetServerNow(func(ctx context.Context) (time.Time, error) {
		// The pass has read its rows; the fires that follow are refused.
		if oom {
			require.NoError(t, c.Do(ctx, c.B().ConfigSet().ParameterValue().ParameterValue("maxmemory", "1").Build()).Error())
		}
		return time.UnixMilli(serverMillis(t, c)), nil
	})
	wait, err := s.Pass(ctx)
	require.NoError(t, c.Do(ctx, c.B().ConfigSet().ParameterValue().ParameterValue("maxmemory", "0").Build()).Error())
	oom = false
	_ = err
	require.EqualValues(t, 1, s.Stats().Errors, "the refused fire is counted")
	require.Empty(t, pendingTicks(t, c, q), "nothing fired")
	require.LessOrEqual(t, wait, 2*time.Second, "a pass whose fire failed retries soon instead of sleeping until the next tick (%v)", wait)

	// The retry fires the tick.
	_, err = s.Pass(ctx)
	require.NoError(t, err)
	require.Equal(t, map[int64]int{tick: 1}, pendingTicks(t, c, q))
}
