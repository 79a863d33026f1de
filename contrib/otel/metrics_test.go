package echootel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/cache"
	echootel "github.com/echocache/echocache/contrib/otel"
	"github.com/echocache/echocache/echotest"
	"github.com/echocache/echocache/tables"
)

// TestMetrics: known activity (3 completed, 1 dead, 1 snoozed, 1 cancelled while it ran and so
// dead, then 2 waiting in a paused queue; a table read 5 times, 3 L1 hits, one Set) read
// through a manual reader: the histograms from the middleware and the fleet's instruments, as
// the Prometheus collector shows them.
func TestMetrics(t *testing.T) {
	t.Parallel()
	srv := echotest.Valkey(t)
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	tel, err := echootel.New(echootel.Config{MeterProvider: mp})
	require.NoError(t, err)
	queue, table := echotest.Name(t), echotest.Name(t)+".t"
	b := srv.Bus(t, nil)
	w := startWorker(t, srv, queue, tel)
	require.NoError(t, bus.Handle(w, "ok", func(context.Context, *bus.Task[int]) error { return nil }, nil))
	require.NoError(t, bus.Handle(w, "bad", func(context.Context, *bus.Task[int]) error { return bus.SkipRetry(errors.New("no")) }, nil))
	require.NoError(t, bus.Handle(w, "nap", func(context.Context, *bus.Task[int]) error { return bus.Snooze(time.Hour) }, nil))
	started := make(chan struct{}, 1)
	require.NoError(t, bus.Handle(w, "long", func(ctx context.Context, _ *bus.Task[int]) error {
		started <- struct{}{}
		<-ctx.Done()
		return context.Cause(ctx)
	}, nil))
	require.NoError(t, w.Start())
	for _, kind := range []string{"ok", "ok", "ok", "bad", "nap"} {
		_, err := bus.EnqueueTask(ctx, b, queue, kind, 0, nil)
		require.NoError(t, err)
	}
	long, err := bus.EnqueueTask(ctx, b, queue, "long", 0, nil)
	require.NoError(t, err)
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the long handler never started")
	}
	state, err := b.Cancel(ctx, queue, long.ID)
	require.NoError(t, err)
	require.Equal(t, bus.StateActive, state)
	echotestEventually(t, "the worker's stats show the six jobs, one cancelled", func() bool {
		fs, err := b.WorkerStats(ctx, queue)
		return err == nil && fs.Total.Completed == 3 && fs.Total.Dead == 2 && fs.Total.Snoozed == 1 && fs.Total.Cancelled == 1
	})
	require.NoError(t, b.Pause(ctx, queue))
	require.NoError(t, b.SetDeadLimit(ctx, queue, 1000))
	for range 2 {
		_, err := bus.EnqueueTask(ctx, b, queue, "ok", 0, nil)
		require.NoError(t, err)
	}
	c, err := cache.New(srv.Client(t), cache.Config{StatsInterval: 50 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	tbl, err := cache.NewTable(c, tables.Spec{Name: table, TTL: time.Minute},
		func(_ context.Context, id int64) (int64, error) { return id, nil }, nil)
	require.NoError(t, err)
	for _, id := range []int64{1, 2, 1, 1, 2} {
		_, err := tbl.Get(ctx, id)
		require.NoError(t, err)
	}
	require.NoError(t, tbl.Set(ctx, 3, 3))
	echotestEventually(t, "the table's stats show the reads and the invalidation", func() bool {
		fs, err := cache.ReadStats(ctx, srv.Client(t), table)
		return err == nil && fs.Total.L1Hits == 3 && fs.Total.InvalidationsReceived == 1
	})

	reg, err := echootel.ObserveFleet(b, echootel.Config{MeterProvider: mp}, &echootel.FleetOpts{Queues: []string{queue}, Tables: []string{table}})
	require.NoError(t, err)
	defer reg.Unregister()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	ms := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		require.Equal(t, echootel.ScopeName, sm.Scope.Name)
		for _, m := range sm.Metrics {
			ms[m.Name] = m
		}
	}
	dest := attribute.String("messaging.destination.name", queue)
	value := func(name string, attrs ...attribute.KeyValue) float64 {
		t.Helper()
		m, ok := ms[name]
		require.Truef(t, ok, "no instrument %s", name)
		want := attribute.NewSet(attrs...)
		switch d := m.Data.(type) {
		case metricdata.Sum[float64]:
			require.True(t, d.IsMonotonic, name)
			for _, p := range d.DataPoints {
				if p.Attributes.Equals(&want) {
					return p.Value
				}
			}
		case metricdata.Gauge[float64]:
			for _, p := range d.DataPoints {
				if p.Attributes.Equals(&want) {
					return p.Value
				}
			}
		default:
			t.Fatalf("%s is a %T", name, m.Data)
		}
		t.Fatalf("%s has no point with %v", name, attrs)
		return 0
	}
	for state, n := range map[string]float64{"pending": 2, "active": 0, "scheduled": 1, "dead": 2} {
		require.Equal(t, n, value("echomq.queue.jobs", dest, attribute.String("echomq.job.state", state)), state)
	}
	require.Equal(t, 1.0, value("echomq.queue.paused", dest))
	require.Equal(t, 1000.0, value("echomq.queue.dead_limit", dest))
	require.Equal(t, 1.0, value("echomq.queue.workers", dest))
	require.Equal(t, float64(bus.DefaultConcurrency), value("echomq.queue.worker_slots", dest))
	for name, n := range map[string]float64{
		"echomq.jobs.claimed": 6, "echomq.jobs.completed": 3, "echomq.jobs.failed": 2, "echomq.jobs.retried": 0,
		"echomq.jobs.dead": 2, "echomq.jobs.snoozed": 1, "echomq.jobs.stale": 0, "echomq.jobs.lease_lost": 0,
		"echomq.jobs.cancelled": 1, "echomq.jobs.rate_limited": 0,
	} {
		require.Equal(t, n, value(name, dest), name)
	}
	tl := attribute.String("echocache.table", table)
	require.Equal(t, 1.0, value("echocache.table.caches", tl))
	require.Equal(t, 3.0, value("echocache.table.hits", tl, attribute.String("echocache.tier", "l1")))
	require.Equal(t, 0.0, value("echocache.table.hits", tl, attribute.String("echocache.tier", "l2")))
	require.Equal(t, 2.0, value("echocache.table.misses", tl))
	require.Equal(t, 2.0, value("echocache.table.loads", tl))
	require.Equal(t, 1.0, value("echocache.table.invalidations_sent", tl))
	require.Equal(t, 1.0, value("echocache.table.invalidations_received", tl))
	require.Equal(t, 1.0, value("echocache.table.propagations", tl))
	require.InDelta(t, value("echocache.table.propagation_time", tl), value("echocache.table.propagation_max", tl), 1e-9)
	require.Greater(t, value("echocache.table.propagation_max", tl), 0.0)
	// One delay: both quantiles are its histogram bucket's top, at most 13% above it.
	for _, q := range []string{"echocache.table.propagation_p50", "echocache.table.propagation_p99"} {
		require.GreaterOrEqual(t, value(q, tl), value("echocache.table.propagation_max", tl), q)
		require.LessOrEqual(t, value(q, tl), 1.13*value("echocache.table.propagation_max", tl), q)
	}

	// The histograms: one run per job by kind and outcome, one wait per first claim.
	hist := func(name string, attrs ...attribute.KeyValue) metricdata.HistogramDataPoint[float64] {
		t.Helper()
		d, ok := ms[name].Data.(metricdata.Histogram[float64])
		require.Truef(t, ok, "%s is a %T", name, ms[name].Data)
		require.Equal(t, "s", ms[name].Unit)
		want := attribute.NewSet(attrs...)
		for _, p := range d.DataPoints {
			if p.Attributes.Equals(&want) {
				return p
			}
		}
		t.Fatalf("%s has no point with %v", name, attrs)
		return metricdata.HistogramDataPoint[float64]{}
	}
	for kind, outcome := range map[string]string{"ok": "completed", "bad": "failed", "nap": "snoozed", "long": "failed"} {
		want := uint64(1)
		if kind == "ok" {
			want = 3
		}
		k := attribute.String("echomq.job.kind", kind)
		require.Equal(t, want, hist("echomq.job.run.duration", dest, k, attribute.String("echomq.job.outcome", outcome)).Count, kind)
		wp := hist("echomq.job.wait.duration", dest, k)
		require.Equal(t, want, wp.Count, kind)
		require.Greater(t, wp.Sum, 0.0)
	}
}
