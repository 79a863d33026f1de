package bus_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// soakDuration is how long the exactly-once tests run: 10 s, or 30 s under EMQ_SOAK=1.
func soakDuration() time.Duration {
	if os.Getenv("EMQ_SOAK") == "1" {
		return 30 * time.Second
	}
	return 10 * time.Second
}

// newScheduler is a scheduler closed at the end of the test.
func newScheduler(t *testing.T, b *bus.Bus, cfg bus.SchedulerConfig) *bus.Scheduler {
	t.Helper()
	s, err := bus.NewScheduler(b, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

// lastOf reads a schedule row's last tick.
func lastOf(t *testing.T, c valkey.Client, q keys.Queue, name string) int64 {
	t.Helper()
	last, err := strconv.ParseInt(schedRow(t, c, q, name)["last"], 10, 64)
	require.NoError(t, err)
	return last
}

// checkEveryTick asserts that q's pending jobs are exactly one per tick of period every from
// the first tick after declared to the schedule's last, each under the scheduler's id, and
// returns how many ticks that is.
func checkEveryTick(t *testing.T, c valkey.Client, queue string, q keys.Queue, sched string, every, declared int64) (ticks, duplicates, gaps int) {
	t.Helper()
	got := pendingTicks(t, c, q)
	last := lastOf(t, c, q, sched)
	for tick := (declared/every + 1) * every; tick <= last; tick += every {
		ticks++
		if got[tick] > 0 {
			_, ok := score(t, c, q.Pending(), tickID(queue, sched, tick))
			require.True(t, ok, "tick %d under its deterministic id", tick)
		}
		switch n := got[tick]; {
		case n == 0:
			gaps++
		case n > 1:
			duplicates += n - 1
		}
		delete(got, tick)
	}
	require.Empty(t, got, "jobs outside the ticks of the span")
	return ticks, duplicates, gaps
}

// TestSchedulerExactlyOnce: 3 schedulers in one process fire one schedule every 100 ms for
// 10 s: every tick of the span has exactly one job, and the fires the schedulers counted add
// up to the jobs (a duplicate would be a fire counted twice for one job id).
func TestSchedulerExactlyOnce(t *testing.T) {
	t.Parallel()
	ctx, c, b, name, q := periodicSetup(t)
	require.NoError(t, b.DeclarePeriodic(ctx, name, bus.Periodic{Name: "p", Every: 100 * time.Millisecond, Payload: []byte("x"), Missed: bus.MissedCatchUp}))
	declared := lastOf(t, c, q, "p")
	scheds := make([]*bus.Scheduler, 3)
	for i := range scheds {
		scheds[i] = newScheduler(t, b, bus.SchedulerConfig{Queue: name})
		require.NoError(t, scheds[i].Start())
	}
	d := soakDuration()
	time.Sleep(d) // the run under test is this long
	var st bus.SchedulerStats
	for _, s := range scheds {
		require.NoError(t, s.Close(ctx))
		x := s.Stats()
		st.Passes, st.Fired, st.Fenced, st.Errors = st.Passes+x.Passes, st.Fired+x.Fired, st.Fenced+x.Fenced, st.Errors+x.Errors
	}
	ticks, dups, gaps := checkEveryTick(t, c, name, q, "p", 100, declared)
	t.Logf("3 schedulers, %v: %d ticks, %d jobs fired, %d duplicates, %d gaps; %d passes, %d fires fenced by another scheduler",
		d, ticks, st.Fired, dups, gaps, st.Passes, st.Fenced)
	require.Zero(t, dups)
	require.Zero(t, gaps)
	require.Equal(t, int64(ticks), st.Fired, "each tick fired by one scheduler")
	require.GreaterOrEqual(t, ticks, int(d/(100*time.Millisecond))*9/10, "the span covers most of the run (a loaded machine starts the schedulers late)")
	require.Zero(t, st.Errors)
}

// TestSchedulerMissed: a schedule every 200 ms whose schedulers all stopped for 10 ticks; the
// first pass after fires by its policy, and the pass after that fires the next tick. The
// passes read an injected clock, so that the count of due ticks is exact.
func TestSchedulerMissed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		missed  bus.MissedPolicy
		catchUp int
		want    int // jobs of the first pass: the newest ones
	}{
		{"latest", bus.MissedLatest, 0, 1},
		{"catch-up", bus.MissedCatchUp, 5, 5},
		{"skip", bus.MissedSkip, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, c, b, name, q := periodicSetup(t)
			const every = 200
			require.NoError(t, b.DeclarePeriodic(ctx, name, bus.Periodic{Name: "p", Every: every * time.Millisecond, Payload: []byte("x"), Missed: tc.missed, CatchUp: tc.catchUp}))
			s := newScheduler(t, b, bus.SchedulerConfig{Queue: name})
			var now int64
			s.SetServerNow(func(context.Context) (time.Time, error) { return time.UnixMilli(now), nil })
			pass := func(at int64) map[int64]int {
				t.Helper()
				valkeytest.Eventually(t, 30*time.Second, "the server's clock to pass the injected one", func() bool { return serverMillis(t, c) >= at })
				before := pendingTicks(t, c, q)
				now = at
				_, err := s.Pass(ctx)
				require.NoError(t, err)
				after := pendingTicks(t, c, q)
				for tick := range before {
					delete(after, tick)
				}
				return after
			}
			first := (lastOf(t, c, q, "p")/every + 1) * every
			require.Equal(t, map[int64]int{first: 1}, pass(first+50), "one due tick fires under every policy")
			// The schedulers stop for 10 ticks: first+1 .. first+10 fall due.
			newest := first + 10*every
			got := pass(newest + 50)
			want := map[int64]int{}
			for i := range tc.want {
				want[newest-int64(i)*every] = 1
			}
			require.Equal(t, want, got, "the first pass after 10 missed ticks")
			require.Equal(t, newest, lastOf(t, c, q, "p"), "last moved to the newest tick")
			require.Equal(t, map[int64]int{newest + every: 1}, pass(newest+every+10), "the next tick fires normally")
			st := s.Stats()
			require.Equal(t, int64(2+tc.want), st.Fired)
			require.Equal(t, int64(10-tc.want), st.Skipped, "the due ticks the policy passed over, counted as ticks")
		})
	}
}

// TestSchedulerDST: cron schedules in America/New_York across the 2026 changes, driven by
// passes every 20 minutes of an injected clock. What fires is robfig/cron's reading of the
// wall clock: the nonexistent 02:30 of March 8 fires nothing that day, the hour after 01:00
// EST is 03:00 EDT, and each wall time of the repeated 01:00 hour of November 1 fires twice.
func TestSchedulerDST(t *testing.T) {
	t.Parallel()
	ny, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)
	at := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339, s)
		require.NoError(t, err)
		return tm
	}
	for _, tc := range []struct {
		name, cron, from, to string
		want                 []string // fired ticks, wall clock in New York
	}{
		{"spring daily 02:30", "30 2 * * *", "2026-03-06T00:00:00-05:00", "2026-03-11T00:00:00-04:00",
			[]string{"2026-03-06T02:30:00-05:00", "2026-03-07T02:30:00-05:00", "2026-03-09T02:30:00-04:00", "2026-03-10T02:30:00-04:00"}},
		{"spring hourly", "0 * * * *", "2026-03-08T00:00:00-05:00", "2026-03-08T05:00:00-04:00",
			[]string{"2026-03-08T01:00:00-05:00", "2026-03-08T03:00:00-04:00", "2026-03-08T04:00:00-04:00", "2026-03-08T05:00:00-04:00"}},
		{"fall hourly", "0 * * * *", "2026-11-01T00:00:00-04:00", "2026-11-01T04:00:00-05:00",
			[]string{"2026-11-01T01:00:00-04:00", "2026-11-01T01:00:00-05:00", "2026-11-01T02:00:00-05:00", "2026-11-01T03:00:00-05:00", "2026-11-01T04:00:00-05:00"}},
		{"fall daily 02:30", "30 2 * * *", "2026-10-31T00:00:00-04:00", "2026-11-03T00:00:00-05:00",
			[]string{"2026-10-31T02:30:00-04:00", "2026-11-01T02:30:00-05:00", "2026-11-02T02:30:00-05:00"}},
		{"fall daily 01:30", "30 1 * * *", "2026-10-31T00:00:00-04:00", "2026-11-03T00:00:00-05:00",
			[]string{"2026-10-31T01:30:00-04:00", "2026-11-01T01:30:00-04:00", "2026-11-01T01:30:00-05:00", "2026-11-02T01:30:00-05:00"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, c, b, name, q := periodicSetup(t)
			require.NoError(t, b.DeclarePeriodic(ctx, name, bus.Periodic{Name: "p", Cron: tc.cron, Zone: "America/New_York", Kind: "report"}))
			from, to := at(tc.from), at(tc.to)
			setLast(t, c, q, "p", from.UnixMilli()) // as if declared at the window's start
			s := newScheduler(t, b, bus.SchedulerConfig{Queue: name})
			now := from
			s.SetServerNow(func(context.Context) (time.Time, error) { return now, nil })
			for ; !now.After(to); now = now.Add(20 * time.Minute) {
				_, err := s.Pass(ctx)
				require.NoError(t, err)
			}
			var got []string
			for tick, n := range pendingTicks(t, c, q) {
				require.Equal(t, 1, n)
				got = append(got, time.UnixMilli(tick).In(ny).Format(time.RFC3339))
			}
			require.ElementsMatch(t, tc.want, got)
			st := s.Stats()
			require.Equal(t, int64(len(tc.want)), st.Fired)
			require.Zero(t, st.Fenced+st.Skipped+st.Errors)
		})
	}
}

// TestSchedulerHandles: a fired task whose kind the handler registry does not know is counted
// (and still enqueued); a raw payload counts as unknown too.
func TestSchedulerHandles(t *testing.T) {
	t.Parallel()
	ctx, c, b, name, q := periodicSetup(t)
	for _, p := range []bus.Periodic{
		{Name: "known", Every: time.Second, Kind: "known"},
		{Name: "other", Every: time.Second, Kind: "other"},
		{Name: "raw", Every: time.Second, Payload: []byte("raw")},
	} {
		require.NoError(t, b.DeclarePeriodic(ctx, name, p))
	}
	w, err := bus.NewWorker(b, bus.WorkerConfig{Queue: name})
	require.NoError(t, err)
	require.NoError(t, bus.HandleRaw(w, "known", func(context.Context, *bus.Task[[]byte]) error { return nil }, nil))
	require.True(t, w.Handles("known"))
	require.False(t, w.Handles("other"))
	s := newScheduler(t, b, bus.SchedulerConfig{Queue: name, Handles: w.Handles,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	last := lastOf(t, c, q, "known")
	tick := (last/1000 + 1) * 1000
	for _, n := range []string{"other", "raw"} {
		setLast(t, c, q, n, last) // one tick for all three
	}
	valkeytest.Eventually(t, 10*time.Second, "the next second", func() bool { return serverMillis(t, c) > tick })
	_, err = s.Pass(ctx)
	require.NoError(t, err)
	st := s.Stats()
	require.Equal(t, int64(3), st.Fired)
	require.Equal(t, int64(2), st.UnknownKind)
	require.Equal(t, map[int64]int{tick: 3}, pendingTicks(t, c, q))
}

// TestSchedulerLifecycle: Start once, Close is idempotent, no Start after Close; a scheduler
// sleeps until the next tick (not a poll), bounded by the refresh.
func TestSchedulerLifecycle(t *testing.T) {
	t.Parallel()
	ctx, _, b, name, _ := periodicSetup(t)
	s := newScheduler(t, b, bus.SchedulerConfig{Queue: name, Refresh: time.Hour})
	wait, err := s.Pass(ctx)
	require.NoError(t, err)
	require.Greater(t, wait, 59*time.Minute, "no schedule: sleep until the refresh")
	require.NoError(t, b.DeclarePeriodic(ctx, name, bus.Periodic{Name: "m", Cron: "@hourly", Payload: []byte("x")}))
	s2 := newScheduler(t, b, bus.SchedulerConfig{Queue: name})
	wait, err = s2.Pass(ctx)
	require.NoError(t, err)
	require.LessOrEqual(t, wait, bus.DefaultSchedulerRefresh, "bounded by the refresh")
	require.Greater(t, wait, time.Duration(0))
	require.NoError(t, s2.Start())
	require.Error(t, s2.Start(), "started twice")
	require.NoError(t, s2.Close(ctx))
	require.NoError(t, s2.Close(ctx), "closed twice")
	require.Error(t, s2.Start(), "Start after Close")
	s3 := newScheduler(t, b, bus.SchedulerConfig{Queue: name})
	require.NoError(t, s3.Close(ctx), "Close before Start")
	_, err = bus.NewScheduler(nil, bus.SchedulerConfig{Queue: name})
	require.ErrorIs(t, err, bus.ErrInvalid)
}

// TestSchedulerTargets: on a standalone server and on a cluster (where a pass's TIME travels
// with the rows of its queue's slot), two schedulers fire a schedule every 100 ms for 2 s
// with one job per tick.
func TestSchedulerTargets(t *testing.T) {
	t.Parallel()
	valkeytest.OnTargets(t, func(t *testing.T, tg valkeytest.Target) {
		ctx, c, b, name, q := setup(t, tg, bus.Config{})
		require.NoError(t, b.DeclarePeriodic(ctx, name, bus.Periodic{Name: "p", Every: 100 * time.Millisecond, Kind: "k", Missed: bus.MissedCatchUp}))
		declared := lastOf(t, c, q, "p")
		scheds := []*bus.Scheduler{newScheduler(t, b, bus.SchedulerConfig{Queue: name}), newScheduler(t, b, bus.SchedulerConfig{Queue: name})}
		for _, s := range scheds {
			require.NoError(t, s.Start())
		}
		valkeytest.Eventually(t, 30*time.Second, "20 ticks", func() bool { return len(pendingTicks(t, c, q)) >= 20 })
		var fired int64
		for _, s := range scheds {
			require.NoError(t, s.Close(ctx))
			fired += s.Stats().Fired
		}
		ticks, dups, gaps := checkEveryTick(t, c, name, q, "p", 100, declared)
		require.Zero(t, dups+gaps)
		require.Equal(t, int64(ticks), fired)
	})
}
