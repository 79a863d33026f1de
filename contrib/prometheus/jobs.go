package echoprom

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/echocache/echocache/bus"
)

// DefaultBuckets are the buckets of both job histograms, in seconds: 1 ms to about 17 min.
var DefaultBuckets = prometheus.ExponentialBuckets(0.001, 4, 11)

// JobMetricsOpts are the options of [NewJobMetrics]; nil means defaults.
type JobMetricsOpts struct {
	// RunBuckets and WaitBuckets are the histograms' buckets in seconds. Default
	// [DefaultBuckets].
	RunBuckets, WaitBuckets []float64
}

// JobMetrics observes jobs in the worker's process: how long handlers run and how long jobs
// waited before their first claim. It is a prometheus.Collector; register it, and install
// [JobMetrics.Middleware] in the workers to observe.
type JobMetrics struct {
	run  *prometheus.HistogramVec
	wait *prometheus.HistogramVec
	now  func() time.Time
}

// NewJobMetrics returns job histograms with no observations.
func NewJobMetrics(opts *JobMetricsOpts) *JobMetrics {
	var o JobMetricsOpts
	if opts != nil {
		o = *opts
	}
	if o.RunBuckets == nil {
		o.RunBuckets = DefaultBuckets
	}
	if o.WaitBuckets == nil {
		o.WaitBuckets = DefaultBuckets
	}
	return &JobMetrics{
		run: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "echomq_job_run_seconds", Help: "Handler run time, by outcome (completed, failed, snoozed, rate_limited, handed_back).",
			Buckets: o.RunBuckets,
		}, []string{"queue", "kind", "outcome"}),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "echomq_job_wait_seconds", Help: "Time from a job's mint (carried by its id) to its first claim.",
			Buckets: o.WaitBuckets,
		}, []string{"queue", "kind"}),
		now: time.Now,
	}
}

// Describe sends the histograms' descriptions.
func (m *JobMetrics) Describe(ch chan<- *prometheus.Desc) {
	m.run.Describe(ch)
	m.wait.Describe(ch)
}

// Collect sends the histograms.
func (m *JobMetrics) Collect(ch chan<- prometheus.Metric) {
	m.run.Collect(ch)
	m.wait.Collect(ch)
}

// Middleware observes each job it wraps: its wait on its first claim (Job.Token 1; a retry's
// wait would count its backoff), and its run time with its outcome.
func (m *JobMetrics) Middleware() bus.Middleware {
	return func(next bus.Handler) bus.Handler {
		return func(ctx context.Context, c *bus.Call) error {
			start := m.now()
			if c.Job.Token == 1 {
				m.wait.WithLabelValues(c.Queue, c.Kind).Observe(max(start.Sub(c.Job.ID.Time()), 0).Seconds())
			}
			err := next(ctx, c)
			m.run.WithLabelValues(c.Queue, c.Kind, outcomeIn(ctx, err)).Observe(m.now().Sub(start).Seconds())
			return err
		}
	}
}

// Outcome names a handler's result as the run-time histogram labels it, as the worker reads
// it: completed (nil), snoozed (a *bus.SnoozeError), rate_limited (a bus.RateLimited: handed
// back, no failure) or failed (any other error, and a panic whatever its value).
func Outcome(err error) string {
	if err == nil {
		return "completed"
	}
	if _, panicked := err.(*bus.PanicError); panicked {
		return "failed"
	}
	var snooze *bus.SnoozeError
	var limited *bus.RateLimitedError
	switch {
	case errors.As(err, &snooze):
		return "snoozed"
	case errors.As(err, &limited):
		return "rate_limited"
	}
	return "failed"
}

// outcomeIn is [Outcome] for a handler that ran in ctx: a failure after Close's deadline
// cancelled ctx (cause bus.ErrWorkerClosed) is handed_back, as the worker hands such a job
// back without counting a failure.
func outcomeIn(ctx context.Context, err error) string {
	o := Outcome(err)
	if o == "failed" && errors.Is(context.Cause(ctx), bus.ErrWorkerClosed) {
		return "handed_back"
	}
	return o
}
