package bus_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
)

// TestSchedulerCatchUpScriptLoadedMidPipeline: a catch-up pass sends a schedule's 1000 due
// ticks oldest first, each fenced by the one before. Meanwhile another client empties the
// script cache and loads periodic_fire again, in a loop (as a restart, then any process's
// first fire, would). By EVALSHA, the older ticks of the pipeline answered NOSCRIPT while the
// newer ones fired, and sent again they found last past them: 58 to 979 of the 1000 ticks
// never fired. Sent by EVAL (lua.Ordered) every tick fires once.
func TestSchedulerCatchUpScriptLoadedMidPipeline(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Start(t, valkeytest.WithoutPersistence()) // SCRIPT FLUSH stays on this server
	c := srv.Client(t)
	other := srv.Client(t)
	ctx := context.Background()
	src := lua.Get("periodic_fire").Source
	for run := range 2 {
		b := newBus(t, c, bus.Config{})
		name := valkeytest.TestName(t) + "." + string(rune('a'+run))
		q := keys.MustQueue(name)
		require.NoError(t, b.DeclarePeriodic(ctx, name, bus.Periodic{Name: "p", Every: time.Hour, Payload: []byte("x"), Missed: bus.MissedCatchUp, CatchUp: bus.MaxCatchUp}))
		hour := time.Hour.Milliseconds()
		h := serverMillis(t, c) / hour * hour
		setLast(t, c, q, "p", h-1000*hour) // the ticks h-999h .. h are due

		var wg sync.WaitGroup
		stop := make(chan struct{})
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				_ = other.Do(ctx, other.B().ScriptFlush().Build()).Error()
				_ = other.Do(ctx, other.B().ScriptLoad().Script(src).Build()).Error()
			}
		})
		s := newScheduler(t, b, bus.SchedulerConfig{Queue: name})
		require.NoError(t, s.Start())
		valkeytest.Eventually(t, 30*time.Second, "the catch-up to reach the newest tick", func() bool { return lastOf(t, c, q, "p") == h })
		close(stop)
		wg.Wait()
		require.NoError(t, s.Close(ctx))
		got := pendingTicks(t, c, q)
		missing := 0
		for tick := h - 999*hour; tick <= h; tick += hour {
			if got[tick] != 1 {
				missing++
			}
		}
		require.Zero(t, missing, "run %d: ticks that never fired (%+v)", run, s.Stats())
	}
}

// TestSchedulerResumeFiresNextTick: a scheduler that found its only schedule paused still
// wakes at the schedule's next tick, so the first tick after a resume fires on time. It used
// to sleep until the next refresh (5 s) and then, under MissedSkip, skip the 20-odd ticks
// due by then, that first one included.
func TestSchedulerResumeFiresNextTick(t *testing.T) {
	t.Parallel()
	ctx, c, b, name, q := periodicSetup(t)
	const every = 200 * time.Millisecond
	require.NoError(t, b.DeclarePeriodic(ctx, name, bus.Periodic{Name: "p", Every: every, Payload: []byte("x"), Missed: bus.MissedSkip}))
	require.NoError(t, b.PausePeriodic(ctx, name, "p"))
	s := newScheduler(t, b, bus.SchedulerConfig{Queue: name}) // the default refresh, 5 s
	require.NoError(t, s.Start())
	valkeytest.Eventually(t, 5*time.Second, "a first pass", func() bool { return s.Stats().Passes > 0 })
	require.NoError(t, b.ResumePeriodic(ctx, name, "p"))
	resumed := lastOf(t, c, q, "p")
	first := (resumed/every.Milliseconds() + 1) * every.Milliseconds()
	valkeytest.Eventually(t, 3*time.Second, "the first tick after the resume to fire", func() bool { return pendingTicks(t, c, q)[first] == 1 })
}

// TestPeriodicSpecChangeStartsAfresh: a schedule whose spec changes from hourly to every
// 100 ms fires none of the new spec's ticks at or before the change, as a new schedule would
// not; it fired up to CatchUp of them at once (10 jobs for the 1.5 s before the change).
// A change of the payload alone keeps last.
func TestPeriodicSpecChangeStartsAfresh(t *testing.T) {
	t.Parallel()
	ctx, c, b, name, q := periodicSetup(t)
	p := bus.Periodic{Name: "p", Every: time.Hour, Payload: []byte("x"), Missed: bus.MissedCatchUp}
	require.NoError(t, b.DeclarePeriodic(ctx, name, p))
	declared := serverMillis(t, c)
	setLast(t, c, q, "p", declared-1500) // as if declared 1.5 s ago
	p.Payload = []byte("y")
	require.NoError(t, b.DeclarePeriodic(ctx, name, p))
	require.Equal(t, declared-1500, lastOf(t, c, q, "p"), "a new payload keeps last")

	p.Every = 100 * time.Millisecond
	require.NoError(t, b.DeclarePeriodic(ctx, name, p))
	changed := lastOf(t, c, q, "p")
	require.GreaterOrEqual(t, changed, declared, "a new spec moves last to the change")
	s := newScheduler(t, b, bus.SchedulerConfig{Queue: name})
	require.NoError(t, s.Start())
	valkeytest.Eventually(t, 5*time.Second, "a fire", func() bool { return s.Stats().Fired > 0 })
	require.NoError(t, s.Close(ctx))
	for tick := range pendingTicks(t, c, q) {
		require.Greater(t, tick, changed, "a tick of the new spec at or before the change fired")
	}
}

// TestSchedulerBadRowIsolated: a schedule row whose key someone overwrote with a string is
// that row's error; the queue's other schedules fire. The failed HGETALL used to fail the
// whole read, and no schedule of the queue fired. PrunePeriodic, whose removal of that row
// fails, still reports the others it removed.
func TestSchedulerBadRowIsolated(t *testing.T) {
	t.Parallel()
	ctx, c, b, name, q := periodicSetup(t)
	require.NoError(t, b.DeclarePeriodic(ctx, name, bus.Periodic{Name: "good", Every: 100 * time.Millisecond, Payload: []byte("x")}))
	require.NoError(t, b.DeclarePeriodic(ctx, name, bus.Periodic{Name: "bad", Every: time.Hour, Payload: []byte("x")}))
	row, err := q.Periodic("bad")
	require.NoError(t, err)
	require.NoError(t, c.Do(ctx, c.B().Set().Key(row).Value("junk").Build()).Error())
	s := newScheduler(t, b, bus.SchedulerConfig{Queue: name})
	require.NoError(t, s.Start())
	valkeytest.Eventually(t, 5*time.Second, "the good schedule to fire", func() bool { return s.Stats().Fired >= 2 })
	require.NoError(t, s.Close(ctx))
	require.Positive(t, s.Stats().Errors, "the bad row is counted")

	gone, err := b.PrunePeriodic(ctx, name, nil)
	require.Error(t, err, "the bad row's removal is refused")
	require.Equal(t, []string{"good"}, gone, "the removal that applied is reported")
}
