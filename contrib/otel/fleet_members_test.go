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

// TestFleetCountersSurviveAWorkerLeaving: a worker completes 5 jobs and closes; once its
// report is gone, echomq.jobs.completed still reads 5 (summed over the live workers it went
// to 0, a negative delta for a delta exporter and a reset for a cumulative backend).
func TestFleetCountersSurviveAWorkerLeaving(t *testing.T) {
	t.Parallel()
	srv := echotest.Valkey(t)
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	tel, err := echootel.New(echootel.Config{MeterProvider: mp})
	require.NoError(t, err)
	queue := echotest.Name(t)
	b := srv.Bus(t, nil)
	w := startWorker(t, srv, queue, tel)
	require.NoError(t, bus.Handle(w, "ok", func(context.Context, *bus.Task[int]) error { return nil }, nil))
	require.NoError(t, w.Start())
	for range 5 {
		_, err := bus.EnqueueTask(ctx, b, queue, "ok", 0, nil)
		require.NoError(t, err)
	}
	echotestEventually(t, "the worker published its 5 completions", func() bool {
		fs, err := b.WorkerStats(ctx, queue)
		return err == nil && fs.Total.Completed == 5
	})
	reg, err := echootel.ObserveFleet(b, echootel.Config{MeterProvider: mp}, &echootel.FleetOpts{Queues: []string{queue}, NoTables: true})
	require.NoError(t, err)
	defer reg.Unregister()
	completed := func() float64 {
		t.Helper()
		var rm metricdata.ResourceMetrics
		require.NoError(t, reader.Collect(ctx, &rm))
		want := attribute.NewSet(attribute.String("messaging.destination.name", queue))
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if d, ok := m.Data.(metricdata.Sum[float64]); ok && m.Name == "echomq.jobs.completed" {
					for _, p := range d.DataPoints {
						if p.Attributes.Equals(&want) {
							return p.Value
						}
					}
				}
			}
		}
		t.Fatal("no echomq.jobs.completed point")
		return 0
	}
	require.Equal(t, 5.0, completed())
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	require.NoError(t, w.Close(cctx))
	echotestEventually(t, "the closed worker's report is gone", func() bool {
		fs, err := b.WorkerStats(ctx, queue)
		return err == nil && len(fs.Workers) == 0
	})
	require.Equal(t, 5.0, completed(), "the closed worker's completions stay counted")
}
