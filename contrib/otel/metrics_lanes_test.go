package echootel_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	echootel "github.com/echocache/echocache/contrib/otel"
	"github.com/echocache/echocache/echotest"
	"github.com/echocache/echocache/internal/lanescene"
)

// TestMetricsLanes: echomq.queue.waiting_jobs (echomq.queue.set) and echomq.queue.lanes
// (echomq.lane.state) are the queue's Counts, before and after the scene's claim (lanescene).
func TestMetricsLanes(t *testing.T) {
	t.Parallel()
	b := echotest.Valkey(t).Bus(t, nil)
	q := echotest.Name(t)
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	reg, err := echootel.ObserveFleet(b, echootel.Config{MeterProvider: mp}, &echootel.FleetOpts{Queues: []string{q}, NoTables: true})
	require.NoError(t, err)
	defer reg.Unregister()
	// collected is the two lane gauges' points, keyed as lanescene.Check reads them ("waiting/lanes", "lanes/held", ...).
	collected := func() map[string]float64 {
		t.Helper()
		var rm metricdata.ResourceMetrics
		require.NoError(t, reader.Collect(context.Background(), &rm))
		out := map[string]float64{}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				key := map[string]string{"echomq.queue.waiting_jobs": "waiting/", "echomq.queue.lanes": "lanes/"}[m.Name]
				if key == "" {
					continue
				}
				for _, p := range m.Data.(metricdata.Gauge[float64]).DataPoints {
					require.True(t, p.Attributes.HasValue(attribute.Key("messaging.destination.name")), m.Name)
					for _, k := range []attribute.Key{echootel.SetKey, echootel.LaneKey} {
						if v, ok := p.Attributes.Value(k); ok {
							out[key+v.AsString()] = p.Value
						}
					}
				}
			}
		}
		return out
	}
	lanescene.Check(t, b, q, collected)
}
