package echoprom_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/cache"
	echoprom "github.com/echocache/echocache/contrib/prometheus"
	"github.com/echocache/echocache/echotest"
	"github.com/echocache/echocache/tables"
)

// counterOf scrapes reg and returns the counter name's sample with labels.
func counterOf(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(scrape(t, reg)))
	require.NoError(t, err)
	return sample(t, fams, name, labels).GetCounter().GetValue()
}

// TestCountersSurviveMembersLeaving: two workers complete jobs and two caches read a table;
// then one worker closes and one cache closes, and their published reports go. The
// exported counters keep what the members that left had counted: summed over the live
// members alone they went down, which Prometheus reads as a counter reset (rate() then
// counts the survivors' whole totals as new growth: a spike at every deploy).
func TestCountersSurviveMembersLeaving(t *testing.T) {
	t.Parallel()
	srv := echotest.Valkey(t)
	ctx := context.Background()
	b := srv.Bus(t, nil)
	queue, table := echotest.Name(t), echotest.Name(t)+".t"

	workers := make([]*bus.Worker, 2)
	for i := range workers {
		w, err := bus.NewWorker(b, bus.WorkerConfig{Queue: queue, StatsInterval: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
		require.NoError(t, err)
		require.NoError(t, bus.Handle(w, "ok", func(context.Context, *bus.Task[int]) error { return nil }, nil))
		require.NoError(t, w.Start())
		workers[i] = w
		t.Cleanup(func() {
			cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = w.Close(cctx)
		})
	}
	caches := make([]*cache.Cache, 2)
	for i := range caches {
		c, err := cache.New(srv.Client(t), cache.Config{StatsInterval: 50 * time.Millisecond})
		require.NoError(t, err)
		t.Cleanup(c.Close)
		tbl, err := cache.NewTable(c, tables.Spec{Name: table, TTL: time.Minute},
			func(_ context.Context, id int64) (int64, error) { return id, nil }, nil)
		require.NoError(t, err)
		for id := range int64(5) {
			_, err := tbl.Get(ctx, id+int64(10*i)) // 5 misses each
			require.NoError(t, err)
		}
		caches[i] = c
	}
	const jobs = 40
	for range jobs {
		_, err := bus.EnqueueTask(ctx, b, queue, "ok", 0, nil)
		require.NoError(t, err)
	}
	eventually(t, "both workers published, all jobs done; both caches published their misses", func() bool {
		fs, err := b.WorkerStats(ctx, queue)
		ts, terr := cache.ReadStats(ctx, srv.Client(t), table)
		return err == nil && terr == nil && len(fs.Workers) == 2 && fs.Total.Completed == jobs &&
			len(ts.Caches) == 2 && ts.Total.Misses == 10
	})

	reg := prometheus.NewRegistry()
	reg.MustRegister(echoprom.NewCollector(b, &echoprom.CollectorOpts{Queues: []string{queue}, Tables: []string{table}}))
	q, tb := map[string]string{"queue": queue}, map[string]string{"table": table}
	require.Equal(t, float64(jobs), counterOf(t, reg, "echomq_jobs_completed_total", q))
	require.Equal(t, float64(10), counterOf(t, reg, "echocache_table_misses_total", tb))

	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	require.NoError(t, workers[0].Close(cctx))
	caches[0].Close()
	eventually(t, "the closed worker's and cache's reports are gone", func() bool {
		fs, err := b.WorkerStats(ctx, queue)
		ts, terr := cache.ReadStats(ctx, srv.Client(t), table)
		return err == nil && terr == nil && len(fs.Workers) == 1 && len(ts.Caches) == 1
	})
	require.Equal(t, float64(jobs), counterOf(t, reg, "echomq_jobs_completed_total", q), "the closed worker's completions stay counted")
	require.Equal(t, float64(10), counterOf(t, reg, "echocache_table_misses_total", tb), "the closed cache's misses stay counted")

	for range 10 {
		_, err := bus.EnqueueTask(ctx, b, queue, "ok", 0, nil)
		require.NoError(t, err)
	}
	eventually(t, "the live worker published the 10 more", func() bool {
		return counterOf(t, reg, "echomq_jobs_completed_total", q) == jobs+10
	})
}
