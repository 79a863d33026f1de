package echoprom_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/cache"
	echoprom "github.com/echocache/echocache/contrib/prometheus"
	"github.com/echocache/echocache/echotest"
	"github.com/echocache/echocache/tables"
)

func TestMain(m *testing.M) { echotest.Main(m) }

// activity is what the test did, for the scrape to show.
type activity struct {
	queue, table string
}

// run makes known activity: a worker (stats every 50 ms, the job histograms installed)
// completes 3 "ok" tasks, sends 1 "bad" to dead, snoozes 1 "nap" for an hour and runs 1
// "long" until it is cancelled (then it is failed into dead); then the queue is paused and 2
// tasks wait. A cache (stats every 50 ms) reads a table: 2 misses, 3
// L1 hits, and one Set whose invalidation comes back.
func run(t *testing.T, srv *echotest.Server, jobs *echoprom.JobMetrics) activity {
	t.Helper()
	ctx := context.Background()
	b := srv.Bus(t, nil)
	a := activity{queue: echotest.Name(t), table: echotest.Name(t) + ".t"}
	w, err := bus.NewWorker(b, bus.WorkerConfig{Queue: a.queue, StatsInterval: 50 * time.Millisecond,
		Lease: 2 * time.Second, HeartbeatInterval: 100 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler), Middleware: []bus.Middleware{jobs.Middleware()}})
	require.NoError(t, err)
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
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = w.Close(cctx)
	})
	for _, kind := range []string{"ok", "ok", "ok", "bad", "nap"} {
		_, err := bus.EnqueueTask(ctx, b, a.queue, kind, 0, nil)
		require.NoError(t, err)
	}
	long, err := bus.EnqueueTask(ctx, b, a.queue, "long", 0, nil)
	require.NoError(t, err)
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the long handler never started")
	}
	state, err := b.Cancel(ctx, a.queue, long.ID)
	require.NoError(t, err)
	require.Equal(t, bus.StateActive, state)
	eventually(t, "the worker's published stats show 6 claimed, one cancelled", func() bool {
		fs, err := b.WorkerStats(ctx, a.queue)
		return err == nil && fs.Total.Completed == 3 && fs.Total.Dead == 2 && fs.Total.Snoozed == 1 && fs.Total.Cancelled == 1
	})
	require.NoError(t, b.Pause(ctx, a.queue))
	require.NoError(t, b.SetDeadLimit(ctx, a.queue, 1000))
	for range 2 {
		_, err := bus.EnqueueTask(ctx, b, a.queue, "ok", 0, nil)
		require.NoError(t, err)
	}

	c, err := cache.New(srv.Client(t), cache.Config{StatsInterval: 50 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	tbl, err := cache.NewTable(c, tables.Spec{Name: a.table, TTL: time.Minute},
		func(_ context.Context, id int64) (int64, error) { return id * 2, nil }, nil)
	require.NoError(t, err)
	for _, id := range []int64{1, 2, 1, 1, 2} {
		_, err := tbl.Get(ctx, id)
		require.NoError(t, err)
	}
	require.NoError(t, tbl.Set(ctx, 3, 6))
	eventually(t, "the table's published stats show the reads and the invalidation", func() bool {
		fs, err := cache.ReadStats(ctx, srv.Client(t), a.table)
		return err == nil && fs.Total.L1Hits == 3 && fs.Total.InvalidationsReceived == 1
	})
	return a
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// scrape serves reg through promhttp and returns the body of one GET /metrics.
func scrape(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	return string(body)
}

// sample finds the value of family name's sample whose labels include want.
func sample(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	t.Helper()
	f, ok := fams[name]
	require.Truef(t, ok, "no metric family %s", name)
	for _, m := range f.GetMetric() {
		match := true
		for k, v := range want {
			found := false
			for _, l := range m.GetLabel() {
				found = found || l.GetName() == k && l.GetValue() == v
			}
			match = match && found
		}
		if match {
			return m
		}
	}
	t.Fatalf("no sample of %s with labels %v", name, want)
	return nil
}

func TestScrape(t *testing.T) {
	t.Parallel()
	srv := echotest.Valkey(t)
	jobs := echoprom.NewJobMetrics(nil)
	a := run(t, srv, jobs)

	reg := prometheus.NewRegistry()
	reg.MustRegister(echoprom.NewCollector(srv.Bus(t, nil), &echoprom.CollectorOpts{Queues: []string{a.queue}, Tables: []string{a.table}}), jobs)
	body := scrape(t, reg)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	require.NoError(t, err)

	q := map[string]string{"queue": a.queue}
	gauge := func(name string, labels map[string]string) float64 {
		m := sample(t, fams, name, labels)
		require.Equal(t, dto.MetricType_GAUGE, fams[name].GetType(), name)
		return m.GetGauge().GetValue()
	}
	counter := func(name string, labels map[string]string) float64 {
		m := sample(t, fams, name, labels)
		require.Equal(t, dto.MetricType_COUNTER, fams[name].GetType(), name)
		return m.GetCounter().GetValue()
	}
	with := func(m map[string]string, k, v string) map[string]string {
		out := map[string]string{k: v}
		for a, b := range m {
			out[a] = b
		}
		return out
	}
	for state, n := range map[string]float64{"pending": 2, "active": 0, "scheduled": 1, "dead": 2} {
		require.Equal(t, n, gauge("echomq_queue_jobs", with(q, "state", state)), state)
	}
	require.Equal(t, 1.0, gauge("echomq_queue_paused", q))
	require.Equal(t, 1000.0, gauge("echomq_queue_dead_limit", q))
	require.Equal(t, 1.0, gauge("echomq_queue_workers", q))
	require.Equal(t, float64(bus.DefaultConcurrency), gauge("echomq_queue_worker_slots", q))
	require.Equal(t, 0.0, gauge("echomq_queue_jobs_running", q))
	for name, n := range map[string]float64{
		"echomq_jobs_claimed_total": 6, "echomq_jobs_completed_total": 3, "echomq_jobs_failed_total": 2,
		"echomq_jobs_retried_total": 0, "echomq_jobs_dead_total": 2, "echomq_jobs_snoozed_total": 1,
		"echomq_jobs_handed_back_total": 0, "echomq_jobs_stale_total": 0, "echomq_jobs_lease_lost_total": 0,
		"echomq_jobs_cancelled_total": 1,
	} {
		require.Equal(t, n, counter(name, q), name)
	}

	// The histograms: one observation per run, by kind and outcome; one wait per first claim.
	for kind, outcome := range map[string]string{"ok": "completed", "bad": "failed", "nap": "snoozed", "long": "failed"} {
		h := sample(t, fams, "echomq_job_run_seconds", map[string]string{"queue": a.queue, "kind": kind, "outcome": outcome}).GetHistogram()
		want := uint64(1)
		if kind == "ok" {
			want = 3
		}
		require.Equal(t, want, h.GetSampleCount(), kind)
		w := sample(t, fams, "echomq_job_wait_seconds", map[string]string{"queue": a.queue, "kind": kind}).GetHistogram()
		require.Equal(t, want, w.GetSampleCount(), kind)
		require.Greater(t, w.GetSampleSum(), 0.0)
		require.Less(t, w.GetSampleSum(), 10.0*float64(want), "waits are short: the worker was idle")
	}
	require.Equal(t, dto.MetricType_HISTOGRAM, fams["echomq_job_run_seconds"].GetType())

	tl := map[string]string{"table": a.table}
	require.Equal(t, 1.0, gauge("echocache_table_caches", tl))
	require.Equal(t, 0.0, gauge("echocache_table_degraded_caches", tl))
	require.Equal(t, 3.0, counter("echocache_table_hits_total", with(tl, "tier", "l1")))
	require.Equal(t, 0.0, counter("echocache_table_hits_total", with(tl, "tier", "l2")))
	require.Equal(t, 2.0, counter("echocache_table_misses_total", tl))
	require.Equal(t, 2.0, counter("echocache_table_loads_total", tl))
	require.Equal(t, 0.0, counter("echocache_table_load_errors_total", tl))
	require.Greater(t, counter("echocache_table_load_seconds_total", tl), 0.0)
	require.Equal(t, 1.0, counter("echocache_table_invalidations_sent_total", tl))
	require.Equal(t, 1.0, counter("echocache_table_invalidations_received_total", tl))
	require.Equal(t, 0.0, counter("echocache_table_gaps_total", tl))
	require.Equal(t, 0.0, counter("echocache_table_flushes_total", tl))
	require.Equal(t, dto.MetricType_HISTOGRAM, fams["echocache_table_propagation_seconds"].GetType())
	p := sample(t, fams, "echocache_table_propagation_seconds", tl).GetHistogram()
	require.Equal(t, uint64(1), p.GetSampleCount())
	require.Greater(t, p.GetSampleSum(), 0.0)
	for _, b := range p.GetBucket() {
		if b.GetUpperBound() >= 2*p.GetSampleSum() {
			require.Equal(t, uint64(1), b.GetCumulativeCount(), "bound %v, delay %v s", b.GetUpperBound(), p.GetSampleSum())
		}
		if b.GetUpperBound() < p.GetSampleSum()/2 {
			require.Zero(t, b.GetCumulativeCount(), "bound %v, delay %v s", b.GetUpperBound(), p.GetSampleSum())
		}
	}
	require.Len(t, p.GetBucket(), len(echoprom.DefaultPropagationBuckets)+1, "the default bounds, then +Inf")
	require.InDelta(t, p.GetSampleSum(), gauge("echocache_table_propagation_max_seconds", tl), 1e-9, "one message: its delay is the max")

	t.Run("promtool", func(t *testing.T) { promtoolCheck(t, body) })
}

// TestScrapeRegistry: without a list, the collector exports every queue and table of the
// registries, the test's among them; a failed read fails the scrape.
func TestScrapeRegistry(t *testing.T) {
	t.Parallel()
	srv := echotest.Valkey(t)
	a := run(t, srv, echoprom.NewJobMetrics(nil))
	reg := prometheus.NewRegistry()
	reg.MustRegister(echoprom.NewCollector(srv.Bus(t, nil), nil))
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(scrape(t, reg)))
	require.NoError(t, err)
	require.Equal(t, 3.0, sample(t, fams, "echomq_jobs_completed_total", map[string]string{"queue": a.queue}).GetCounter().GetValue())
	require.Equal(t, 3.0, sample(t, fams, "echocache_table_hits_total", map[string]string{"table": a.table, "tier": "l1"}).GetCounter().GetValue())

	bad := prometheus.NewRegistry()
	bad.MustRegister(echoprom.NewCollector(srv.Bus(t, nil), &echoprom.CollectorOpts{Queues: []string{"no{good"}, NoTables: true}))
	_, err = bad.Gather()
	require.ErrorContains(t, err, "no{good")
}

// promtoolCheck runs promtool check metrics on a scrape. Under make test
// (ECHOCACHE_REQUIRE_PROMTOOL=1, after .ci/install-promtool) a missing promtool fails the
// test; elsewhere it is skipped with a message.
func promtoolCheck(t *testing.T, body string) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("ECHOCACHE_REQUIRE_PROMTOOL") != "" {
			t.Fatal("promtool is not on PATH, and ECHOCACHE_REQUIRE_PROMTOOL is set: run bash .ci/install-promtool (Debian package prometheus)")
		}
		t.Skip("promtool is not on PATH: promtool check metrics not run (bash .ci/install-promtool installs it; make test requires it)")
	}
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	out, err := cmd.CombinedOutput()
	require.NoErrorf(t, err, "promtool check metrics:\n%s", out)
	require.Empty(t, strings.TrimSpace(string(out)), "promtool check metrics found problems")
}
