package echoprom_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/contrib/prometheus"
	"github.com/echocache/echocache/echotest"
)

// TestScrapeLanes: a queue's lane gauges are its Counts. Lane a holds 3 jobs and an urgent
// one, lane b 3 under a rate of one claim an hour: before a claim, 6 wait in the lanes' sets,
// 1 is urgent and both lanes are ready; a claim of 10 takes the urgent job, a's 3 and one of
// b's, after which b is held back by its rate with 2 jobs waiting, and both lanes have claimed
// jobs.
func TestScrapeLanes(t *testing.T) {
	t.Parallel()
	srv := echotest.Valkey(t)
	b := srv.Bus(t, nil)
	q := echotest.Name(t)
	ctx := context.Background()
	enqueue := func(lane string, priority int) {
		t.Helper()
		_, err := b.Enqueue(ctx, q, []byte("x"), &bus.EnqueueOpts{Lane: lane, Priority: priority})
		require.NoError(t, err)
	}
	for range 3 {
		enqueue("a", 0)
		enqueue("b", 0)
	}
	require.NoError(t, b.SetLaneLimits(ctx, q, "b", bus.LaneLimits{Rate: bus.Rate{Limit: 1, Per: time.Hour}}))
	enqueue("a", 2)

	reg := prometheus.NewRegistry()
	reg.MustRegister(echoprom.NewCollector(b, &echoprom.CollectorOpts{Queues: []string{q}, NoTables: true}))
	gauges := func() map[string]float64 {
		t.Helper()
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(strings.NewReader(scrape(t, reg)))
		require.NoError(t, err)
		out := map[string]float64{}
		for name, label := range map[string]string{"echomq_queue_waiting_jobs": "set", "echomq_queue_lanes": "state"} {
			for _, m := range fams[name].GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == label {
						out[name+"/"+l.GetValue()] = m.GetGauge().GetValue()
					}
				}
			}
		}
		return out
	}
	fromCounts := func() map[string]float64 {
		t.Helper()
		c, err := b.Counts(ctx, q)
		require.NoError(t, err)
		return map[string]float64{
			"echomq_queue_waiting_jobs/lanes": float64(c.InLanes), "echomq_queue_waiting_jobs/urgent": float64(c.Urgent),
			"echomq_queue_lanes/ready": float64(c.LanesReady), "echomq_queue_lanes/held": float64(c.LanesHeld),
			"echomq_queue_lanes/active": float64(c.LanesActive),
		}
	}

	before := gauges()
	require.Equal(t, fromCounts(), before)
	require.Equal(t, 1.0, before["echomq_queue_waiting_jobs/urgent"])
	require.Equal(t, 2.0, before["echomq_queue_lanes/ready"])

	require.Equal(t, 6.0, before["echomq_queue_waiting_jobs/lanes"])
	jobs, err := b.Claim(ctx, q, &bus.ClaimOpts{Count: 10})
	require.NoError(t, err)
	require.Len(t, jobs, 5)
	after := gauges()
	require.Equal(t, fromCounts(), after)
	require.Zero(t, after["echomq_queue_waiting_jobs/urgent"])
	require.Equal(t, 2.0, after["echomq_queue_waiting_jobs/lanes"])
	require.Equal(t, 1.0, after["echomq_queue_lanes/held"], "b is held back by its rate")
	require.Equal(t, 2.0, after["echomq_queue_lanes/active"])
}
