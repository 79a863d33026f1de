package bus_test

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
)

// fleet reads queue's published stats.
func fleet(t *testing.T, b *bus.Bus, queue string) bus.FleetStats {
	t.Helper()
	fs, err := b.WorkerStats(context.Background(), queue)
	require.NoError(t, err)
	return fs
}

// TestWorkerStatsPublished: two workers of one queue publish their counters; another process
// reads each worker's and their sums, and a worker that stops withdraws its snapshot.
func TestWorkerStatsPublished(t *testing.T) {
	t.Parallel()
	valkeytest.OnTargets(t, func(t *testing.T, tg valkeytest.Target) {
		ctx, c, b, name, _ := setup(t, tg, bus.Config{})
		start := func(id string, conc int) *bus.Worker {
			w, err := bus.NewWorker(b, bus.WorkerConfig{Queue: name, ID: id, Concurrency: conc, StatsInterval: 20 * time.Millisecond, Logger: quiet})
			require.NoError(t, err)
			bus.MustHandle(w, "ok", func(context.Context, *bus.Task[args]) error { return nil }, nil)
			bus.MustHandle(w, "bad", func(context.Context, *bus.Task[args]) error { return bus.SkipRetry(nil) }, nil)
			require.NoError(t, w.Start())
			return w
		}
		w1, w2 := start("w1", 3), start("w2", 5)
		t.Cleanup(func() { _ = w2.Close(context.Background()) })
		require.Equal(t, "w1", w1.ID())
		enqueueTasks(t, b, name, "ok", 40, "")
		enqueueTasks(t, b, name, "bad", 10, "")
		drained(t, b, name, 20*time.Second)

		reader := newBus(t, c, bus.Config{}) // a tool in another process
		var fs bus.FleetStats
		valkeytest.Eventually(t, 10*time.Second, "both workers' last counters to be published", func() bool {
			fs = fleet(t, reader, name)
			return len(fs.Workers) == 2 && fs.Total.Completed == 40 && fs.Total.Dead == 10
		})
		s1, s2 := w1.Stats(), w2.Stats()
		require.Equal(t, []string{"w1", "w2"}, []string{fs.Workers[0].ID, fs.Workers[1].ID})
		// Round trips go on after the drain (heartbeats, housekeeping): the published count is
		// a past reading of the worker's own, the job counters are final.
		for i, s := range []bus.WorkerStats{s1, s2} {
			pub := fs.Workers[i].Stats
			require.Positive(t, pub.RoundTrips, "%s publishes its round trips", fs.Workers[i].ID)
			require.LessOrEqual(t, pub.RoundTrips, s.RoundTrips)
			require.Positive(t, pub.RoundTripTime)
			s.RoundTrips, s.RoundTripTime, pub.RoundTrips, pub.RoundTripTime = 0, 0, 0, 0
			// The automatic prefetch buffer's size is a gauge, like Running, read when published.
			require.LessOrEqual(t, pub.Prefetch, fs.Workers[i].Concurrency, "%s's buffer is at most its slots", fs.Workers[i].ID)
			s.Prefetch, pub.Prefetch = 0, 0
			require.Equal(t, s, pub, "%s's published counters are its own", fs.Workers[i].ID)
		}
		total := fs.Total
		total.RoundTrips, total.RoundTripTime, total.Prefetch = 0, 0, 0
		require.Equal(t, bus.WorkerStats{Queue: name, Claimed: 50, Completed: 40, Failed: 10, Dead: 10}, total)
		require.Equal(t, 8, fs.Concurrency)
		require.False(t, fs.Partial)
		for _, r := range fs.Workers {
			require.Equal(t, []string{"bad", "ok"}, r.Kinds)
			require.Equal(t, 20*time.Millisecond, r.Every)
			require.Equal(t, 60*time.Millisecond, r.Expires.Sub(r.At), "a snapshot lives 3 intervals")
			require.False(t, r.At.After(fs.At), "stamped by the server's clock, before the read")
			require.WithinDuration(t, time.Now(), r.Started, time.Minute)
		}

		require.NoError(t, w1.Close(ctx))
		fs = fleet(t, reader, name)
		require.Len(t, fs.Workers, 1, "Close withdrew w1's snapshot")
		require.Equal(t, "w2", fs.Workers[0].ID)
		_, ok := listed(t, ctx, reader, name)
		require.True(t, ok, "workers list their queue")
	})
}

// TestWorkerStatsStale: a snapshot whose worker died (it never withdrew it) stops counting
// once it expires, by the server's clock, and a live worker's next report prunes it; the
// last worker's withdrawal leaves no hash; a worker started on a queue nothing was enqueued to
// lists it.
func TestWorkerStatsStale(t *testing.T) {
	t.Parallel()
	ctx, c, b, _, _ := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	name := fresh(t)
	q := keys.MustQueue(name)
	// A dead worker's last snapshot, 400 ms to live, and another publisher's that lives on,
	// both written as a client of another runtime writes them.
	raw := rawReport(t, c, q, "dead", `{"v":1,"every_ms":10,"concurrency":4,"claimed":7,"completed":7}`, 400)
	require.Equal(t, int64(0), raw[1])
	rawReport(t, c, q, "keeper", `{"v":1,"concurrency":1}`, 60_000)
	fs := fleet(t, b, name)
	require.Len(t, fs.Workers, 2)
	require.Equal(t, int64(7), fs.Total.Completed)
	require.Equal(t, 5, fs.Concurrency)
	valkeytest.Eventually(t, 5*time.Second, "the dead worker's snapshot to expire", func() bool {
		return len(fleet(t, b, name).Workers) == 1
	})
	require.Equal(t, "keeper", fleet(t, b, name).Workers[0].ID)
	n, err := c.Do(ctx, c.B().Hlen().Key(q.Workers()).Build()).AsInt64()
	require.NoError(t, err)
	require.Equal(t, int64(2), n, "expired, not yet pruned")

	_, ok := listed(t, ctx, b, name)
	require.False(t, ok)
	w := startWorker(t, b, bus.WorkerConfig{Queue: name, ID: "live", StatsInterval: 10 * time.Millisecond}, func(w *bus.Worker) {
		bus.MustHandle(w, "ok", func(context.Context, *bus.Task[args]) error { return nil }, nil)
	})
	valkeytest.Eventually(t, 5*time.Second, "the live worker's report to prune the dead one", func() bool {
		fields, err := c.Do(ctx, c.B().Hkeys().Key(q.Workers()).Build()).AsStrSlice()
		require.NoError(t, err)
		sort.Strings(fields)
		return len(fields) == 2 && fields[0] == "keeper" && fields[1] == "live"
	})
	rawReport(t, c, q, "keeper", "", 60_000)
	_, ok = listed(t, ctx, b, name)
	require.True(t, ok, "Start lists the queue")
	require.NoError(t, w.Close(ctx))
	n, err = c.Do(ctx, c.B().Exists().Key(q.Workers()).Build()).AsInt64()
	require.NoError(t, err)
	require.Zero(t, n, "the last worker withdrew its snapshot: the hash is gone")
}

// rawReport calls workers_report by EVAL of its file's source, as a client of another runtime
// would, and returns its reply.
func rawReport(t *testing.T, c valkey.Client, q keys.Queue, id, snap string, ttlMS int) []int64 {
	t.Helper()
	cmd := c.B().Eval().Script(lua.Get("workers_report").Source).Numkeys(1).Key(q.Workers()).
		Arg(id, snap, strconv.Itoa(ttlMS), "16").Build()
	out, err := c.Do(context.Background(), cmd).AsIntSlice()
	require.NoError(t, err)
	return out
}

// TestWorkerStatsOff: a negative StatsInterval publishes nothing; the queue is still listed.
func TestWorkerStatsOff(t *testing.T) {
	t.Parallel()
	ctx, c, b, name, q := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	startWorker(t, b, bus.WorkerConfig{Queue: name, StatsInterval: -1}, func(w *bus.Worker) {
		bus.MustHandle(w, "ok", func(context.Context, *bus.Task[args]) error { return nil }, nil)
	})
	valkeytest.Eventually(t, 5*time.Second, "the queue to be listed", func() bool {
		_, ok := listed(t, ctx, b, name)
		return ok
	})
	enqueueTasks(t, b, name, "ok", 5, "")
	drained(t, b, name, 10*time.Second)
	n, err := c.Do(ctx, c.B().Exists().Key(q.Workers()).Build()).AsInt64()
	require.NoError(t, err)
	require.Zero(t, n)
	require.Empty(t, fleet(t, b, name).Workers)
}

// TestWorkerStatsConfig: the new fields are validated and name themselves.
func TestWorkerStatsConfig(t *testing.T) {
	t.Parallel()
	b := newBus(t, valkeytest.Shared(t).Client(t), bus.Config{})
	for field, cfg := range map[string]bus.WorkerConfig{
		"ID":            {Queue: "q", ID: "a\nb"},
		"StatsInterval": {Queue: "q", StatsInterval: time.Millisecond},
		"Middleware[1]": {Queue: "q", Middleware: []bus.Middleware{func(h bus.Handler) bus.Handler { return h }, nil}},
	} {
		_, err := bus.NewWorker(b, cfg)
		require.ErrorIs(t, err, bus.ErrInvalid, field)
		require.Contains(t, err.Error(), field)
	}
	_, err := bus.NewWorker(b, bus.WorkerConfig{Queue: "q", StatsInterval: 9 * time.Hour})
	require.ErrorIs(t, err, bus.ErrInvalid)
	w, err := bus.NewWorker(b, bus.WorkerConfig{Queue: "q"})
	require.NoError(t, err)
	require.True(t, strings.Count(w.ID(), "-") >= 2, "default id <host>-<pid>-<hex>: %s", w.ID())
	other, err := bus.NewWorker(b, bus.WorkerConfig{Queue: "q"})
	require.NoError(t, err)
	require.NotEqual(t, w.ID(), other.ID())
}

// TestFleetRates: rates are taken per worker between two reads, over the time between its
// snapshots; a worker in one read only, or whose counters went down, counts in neither.
func TestFleetRates(t *testing.T) {
	t.Parallel()
	at := time.UnixMilli(1_700_000_000_000)
	rep := func(id string, dt time.Duration, completed, failed int64) bus.WorkerReport {
		return bus.WorkerReport{ID: id, At: at.Add(dt), Stats: bus.WorkerStats{Completed: completed, Failed: failed, Claimed: completed + failed, Cancelled: failed / 2}}
	}
	prev := bus.FleetStats{Workers: []bus.WorkerReport{rep("a", 0, 100, 0), rep("b", 0, 50, 5), rep("gone", 0, 9, 9), rep("restarted", 0, 500, 0)}}
	cur := bus.FleetStats{Workers: []bus.WorkerReport{rep("a", 2*time.Second, 300, 0), rep("b", 4*time.Second, 90, 9), rep("new", 0, 1000, 0), rep("restarted", time.Second, 3, 0)}}
	r := cur.Rates(prev)
	require.Equal(t, 2, r.Workers)
	require.InDelta(t, 100+10, r.Completed, 1e-9) // a: 200 in 2 s; b: 40 in 4 s
	require.InDelta(t, 1, r.Failed, 1e-9)
	require.InDelta(t, 111, r.Claimed, 1e-9)
	require.InDelta(t, 0.5, r.Cancelled, 1e-9) // b: from 2 to 4 in 4 s
	require.Zero(t, cur.Rates(cur).Workers, "no time between the snapshots")
}
