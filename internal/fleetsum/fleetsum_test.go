package fleetsum

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/cache"
)

// TestTotalNeverGoesDown: the fleet's totals never go down, whether a member leaves, comes
// back (a report that expired and was published again), restarts under the same key (its
// counters from zero), or is forgotten after ForgetAfter; and nothing is counted twice.
func TestTotalNeverGoesDown(t *testing.T) {
	var s Sums
	t0 := time.Unix(1_800_000_000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	c := func(a, b float64) counters { return counters{"a": a, "b": b} }

	require.Equal(t, c(15, 3), s.total("q", map[string]counters{"x": c(10, 1), "y": c(5, 2)}, at(0)))
	require.Equal(t, c(17, 3), s.total("q", map[string]counters{"x": c(12, 1), "y": c(5, 2)}, at(time.Second)))
	// y's report expired: its last counters stay.
	require.Equal(t, c(18, 3), s.total("q", map[string]counters{"x": c(13, 1)}, at(2*time.Second)))
	// y is back with the counters it had, and more: counted once.
	require.Equal(t, c(20, 4), s.total("q", map[string]counters{"x": c(13, 1), "y": c(7, 3)}, at(3*time.Second)))
	// x restarted under the same key: its first life (13, 1) stays, its second adds.
	require.Equal(t, c(22, 4), s.total("q", map[string]counters{"x": c(2, 0), "y": c(7, 3)}, at(4*time.Second)))
	// Both leave, and are forgotten after ForgetAfter: their counts join the fleet's sum.
	require.Equal(t, c(22, 4), s.total("q", nil, at(5*time.Second)))
	require.Equal(t, c(22, 4), s.total("q", nil, at(5*time.Second+ForgetAfter+time.Second)))
	require.Empty(t, s.fleets["q"].members, "every member forgotten")
	require.Equal(t, c(23, 4), s.total("q", map[string]counters{"z": c(1, 0)}, at(6*time.Second+ForgetAfter)))
	require.Empty(t, s.total("other", nil, at(0)), "fleets are apart")
}

// TestForgottenMemberComesBack: a member forgotten after ForgetAfter (its counters folded into
// the sum of the gone) that reports again under its key, a process cut off for over an hour,
// is counted once: its counters leave the sum of the gone as it rejoins. They were counted in
// both, and the fleet's total jumped by the member's whole life. One that comes back
// restarted (counters lower) is another life: its first stays counted.
func TestForgottenMemberComesBack(t *testing.T) {
	var s Sums
	t0 := time.Unix(1_800_000_000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	c := func(a float64) counters { return counters{"a": a} }
	require.Equal(t, c(1010), s.total("q", map[string]counters{"w1": c(1000), "w2": c(10)}, at(0)))
	require.Equal(t, c(1011), s.total("q", map[string]counters{"w2": c(11)}, at(time.Second)))
	require.Equal(t, c(1012), s.total("q", map[string]counters{"w2": c(12)}, at(2*time.Hour)))
	require.NotContains(t, s.fleets["q"].members, "w1", "w1 is forgotten")
	require.Equal(t, c(1013), s.total("q", map[string]counters{"w1": c(1000), "w2": c(13)}, at(3*time.Hour)), "w1 back: counted once")
	require.Equal(t, c(1015), s.total("q", map[string]counters{"w1": c(1001), "w2": c(14)}, at(3*time.Hour+time.Second)))

	// A member forgotten, then back restarted (its counters from zero): its first life stays.
	require.Equal(t, c(1015), s.total("q", map[string]counters{"w2": c(14)}, at(4*time.Hour)))
	require.Equal(t, c(1015), s.total("q", map[string]counters{"w2": c(14)}, at(6*time.Hour)))
	require.Equal(t, c(1017), s.total("q", map[string]counters{"w1": c(2), "w2": c(14)}, at(7*time.Hour)))
	// Past TombstoneFor a forgotten member is not recognised any more, and nothing is kept.
	s.total("q", map[string]counters{"w2": c(14)}, at(8*time.Hour))
	s.total("q", map[string]counters{"w2": c(14)}, at(10*time.Hour))
	s.total("q", map[string]counters{"w2": c(14)}, at(10*time.Hour+TombstoneFor+time.Second))
	require.Empty(t, s.fleets["q"].tombs)
}

// TestQueueAndTable: Queue and Table fold every counter they list and keep the rest of
// Total, a worker restarted under its ID (another Started) counting as another member, the
// propagation histogram folded bucket by bucket.
func TestQueueAndTable(t *testing.T) {
	var s Sums
	t0 := time.Unix(1_800_000_000, 0)
	w := func(started time.Time, completed int64) bus.WorkerReport {
		return bus.WorkerReport{ID: "w1", Started: started, Stats: bus.WorkerStats{Completed: completed, Claimed: completed, RateLimited: 1}}
	}
	fs := bus.FleetStats{Queue: "q", At: t0, Workers: []bus.WorkerReport{w(t0, 5)}, Total: bus.WorkerStats{Running: 2}}
	got := s.Queue(fs)
	require.Equal(t, bus.WorkerStats{Running: 2, Claimed: 5, Completed: 5, RateLimited: 1}, got)
	fs.Workers, fs.At = []bus.WorkerReport{w(t0.Add(time.Minute), 1)}, t0.Add(time.Minute) // restarted
	require.Equal(t, int64(6), s.Queue(fs).Completed)

	h := func(n int64) []cache.HistogramBucket {
		return []cache.HistogramBucket{{UpTo: time.Millisecond, Count: n}, {UpTo: 100 * time.Microsecond, Count: 1}}
	}
	cr := func(id string, misses, n int64) cache.CacheReport {
		return cache.CacheReport{ID: id, Stats: cache.Stats{Misses: misses, PropagationCount: n + 1, PropagationTotal: time.Duration(n) * time.Millisecond, PropagationHistogram: h(n)}}
	}
	ts := cache.FleetStats{Table: "t", At: t0, Caches: []cache.CacheReport{cr("a", 3, 2), cr("b", 4, 1)}, Total: cache.Stats{PropagationMax: time.Second}}
	st := s.Table(ts)
	require.Equal(t, int64(7), st.Misses)
	require.Equal(t, int64(5), st.PropagationCount)
	require.Equal(t, 3*time.Millisecond, st.PropagationTotal)
	require.Equal(t, []cache.HistogramBucket{{UpTo: 100 * time.Microsecond, Count: 2}, {UpTo: time.Millisecond, Count: 3}}, st.PropagationHistogram)
	require.Equal(t, time.Second, st.PropagationMax, "what is not folded is Total's")
	ts.Caches, ts.At = []cache.CacheReport{cr("b", 5, 1)}, t0.Add(time.Second) // a closed
	st = s.Table(ts)
	require.Equal(t, int64(8), st.Misses)
	require.Equal(t, []cache.HistogramBucket{{UpTo: 100 * time.Microsecond, Count: 2}, {UpTo: time.Millisecond, Count: 3}}, st.PropagationHistogram)
}
