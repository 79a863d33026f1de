package echootel_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/echocache/echocache/bus"
	echootel "github.com/echocache/echocache/contrib/otel"
	"github.com/echocache/echocache/echotest"
)

// TestMetricsLanes: the lane instruments are the queue's Counts. Lane a holds 3 jobs and an
// urgent one, lane b 3 under a rate of one claim an hour; a claim of 10 takes the urgent job,
// a's 3 and one of b's, and b is then held back with 2 jobs waiting.
func TestMetricsLanes(t *testing.T) {
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
	enqueue("a", 2)
	require.NoError(t, b.SetLaneLimits(ctx, q, "b", bus.LaneLimits{Rate: bus.Rate{Limit: 1, Per: time.Hour}}))

	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	reg, err := echootel.ObserveFleet(b, echootel.Config{MeterProvider: mp}, &echootel.FleetOpts{Queues: []string{q}, NoTables: true})
	require.NoError(t, err)
	defer reg.Unregister()
	dest := attribute.String("messaging.destination.name", q)
	// read is every point of the two lane gauges, by instrument and attribute value.
	read := func() map[string]float64 {
		t.Helper()
		var rm metricdata.ResourceMetrics
		require.NoError(t, reader.Collect(ctx, &rm))
		out := map[string]float64{}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				g, ok := m.Data.(metricdata.Gauge[float64])
				if !ok || m.Name != "echomq.queue.waiting_jobs" && m.Name != "echomq.queue.lanes" {
					continue
				}
				for _, p := range g.DataPoints {
					require.True(t, p.Attributes.HasValue(dest.Key), m.Name)
					for _, k := range []attribute.Key{echootel.SetKey, echootel.LaneKey} {
						if v, ok := p.Attributes.Value(k); ok {
							out[m.Name+"/"+v.AsString()] = p.Value
						}
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
			"echomq.queue.waiting_jobs/lanes": float64(c.InLanes), "echomq.queue.waiting_jobs/urgent": float64(c.Urgent),
			"echomq.queue.lanes/ready": float64(c.LanesReady), "echomq.queue.lanes/held": float64(c.LanesHeld),
			"echomq.queue.lanes/active": float64(c.LanesActive),
		}
	}

	before := read()
	require.Equal(t, fromCounts(), before)
	require.Equal(t, 6.0, before["echomq.queue.waiting_jobs/lanes"])
	require.Equal(t, 1.0, before["echomq.queue.waiting_jobs/urgent"])
	require.Equal(t, 2.0, before["echomq.queue.lanes/ready"])

	jobs, err := b.Claim(ctx, q, &bus.ClaimOpts{Count: 10})
	require.NoError(t, err)
	require.Len(t, jobs, 5)
	after := read()
	require.Equal(t, fromCounts(), after)
	require.Equal(t, 2.0, after["echomq.queue.waiting_jobs/lanes"])
	require.Equal(t, 1.0, after["echomq.queue.lanes/held"], "b is held back by its rate")
	require.Equal(t, 2.0, after["echomq.queue.lanes/active"])
}
