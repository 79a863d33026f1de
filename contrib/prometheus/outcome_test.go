package echoprom_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	echoprom "github.com/echocache/echocache/contrib/prometheus"
	"github.com/echocache/echocache/echotest"
)

// runOutcomes is how many observations of kind k the run histogram holds, by outcome.
func runOutcomes(t *testing.T, jobs *echoprom.JobMetrics, kind string) map[string]uint64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(jobs)
	fams, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]uint64{}
	for _, f := range fams {
		if f.GetName() != "echomq_job_run_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["kind"] == kind {
				out[labels["outcome"]] += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return out
}

// TestJobMetricsOutcomeAsWorker: the run histogram's outcome is what the worker does with the
// job: a handler that panics with a Snooze error fails it (a panic is no instruction), and one
// that returns bus.RateLimited is handed back, no failure (the worker counts it in neither
// echomq_jobs_failed_total nor snoozed).
func TestJobMetricsOutcomeAsWorker(t *testing.T) {
	t.Parallel()
	jobs := echoprom.NewJobMetrics(nil)
	cfg := bus.WorkerConfig{Middleware: []bus.Middleware{jobs.Middleware()}}
	ctx := context.Background()

	panicky := echotest.NewWorker(t, cfg, "panicky", func(context.Context, *bus.Task[int]) error {
		panic(bus.Snooze(time.Minute))
	}, nil)
	require.Equal(t, echotest.Failed, panicky.Work(ctx, t, 1, nil).Outcome)
	require.Equal(t, map[string]uint64{"failed": 1}, runOutcomes(t, jobs, "panicky"))
	require.Equal(t, "failed", echoprom.Outcome(&bus.PanicError{Value: bus.Snooze(time.Minute)}))

	limited := echotest.NewWorker(t, cfg, "limited", func(context.Context, *bus.Task[int]) error {
		return bus.RateLimited(time.Minute)
	}, nil)
	require.Equal(t, echotest.RateLimited, limited.Work(ctx, t, 1, nil).Outcome)
	require.Equal(t, map[string]uint64{"rate_limited": 1}, runOutcomes(t, jobs, "limited"))
}

// TestJobMetricsHandedBackOnClose: a handler whose context Close's deadline cancelled (cause
// bus.ErrWorkerClosed) and that then returns its error is handed back by the worker, not
// failed: the run histogram says handed_back.
func TestJobMetricsHandedBackOnClose(t *testing.T) {
	t.Parallel()
	srv := echotest.Valkey(t)
	b := srv.Bus(t, nil)
	queue := echotest.Name(t)
	jobs := echoprom.NewJobMetrics(nil)
	events := make(chan bus.JobEventType, 4)
	w, err := bus.NewWorker(b, bus.WorkerConfig{Queue: queue, StatsInterval: -1, HousekeepInterval: -1,
		Logger: slog.New(slog.DiscardHandler), Middleware: []bus.Middleware{jobs.Middleware()},
		OnEvent: func(e bus.JobEvent) {
			if e.Type != bus.JobClaimed && e.Type != bus.JobExtended {
				events <- e.Type
			}
		}})
	require.NoError(t, err)
	started := make(chan struct{}, 1)
	require.NoError(t, bus.Handle(w, "long", func(ctx context.Context, _ *bus.Task[int]) error {
		started <- struct{}{}
		<-ctx.Done()
		return context.Cause(ctx)
	}, nil))
	require.NoError(t, w.Start())
	_, err = bus.EnqueueTask(context.Background(), b, queue, "long", 0, nil)
	require.NoError(t, err)
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler never started")
	}
	cctx, cancel := context.WithCancel(context.Background())
	cancel() // Close's deadline has passed: the handler is cancelled at once
	require.ErrorIs(t, w.Close(cctx), context.Canceled)
	require.Equal(t, bus.JobHandedBack, <-events, "the worker hands the job back")
	require.Equal(t, map[string]uint64{"handed_back": 1}, runOutcomes(t, jobs, "long"))
}
