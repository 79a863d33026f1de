package bus_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
)

// TestRatesWorkerRestarted: a worker that restarted under the same ID (a configured,
// stable WorkerConfig.ID) between two reads has counters that start again from zero; when
// they have grown past the earlier read's by the later one, no counter went down, but their
// growth is not the worker's rate. Its Started tells the two lives apart: it counts in neither.
func TestRatesWorkerRestarted(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_000)
	report := func(started, at time.Time, completed int64) bus.WorkerReport {
		return bus.WorkerReport{ID: "worker-1", At: at, Started: started, Stats: bus.WorkerStats{Claimed: completed, Completed: completed}}
	}
	prev := bus.FleetStats{Workers: []bus.WorkerReport{report(t0, t0.Add(10*time.Second), 100)}}
	// The same life: 100 more in 10 s.
	same := bus.FleetStats{Workers: []bus.WorkerReport{report(t0, t0.Add(20*time.Second), 200)}}
	r := same.Rates(prev)
	require.Equal(t, 1, r.Workers)
	require.InDelta(t, 10, r.Completed, 1e-9)
	// Restarted at 11 s, 500 completed since: not (500-100)/50 s.
	restarted := bus.FleetStats{Workers: []bus.WorkerReport{report(t0.Add(11*time.Second), t0.Add(60*time.Second), 500)}}
	r = restarted.Rates(prev)
	require.Zero(t, r.Workers, "a restarted worker counts in neither read")
	require.Zero(t, r.Completed)
}
