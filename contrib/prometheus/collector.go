package echoprom

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/fleetsum"
)

// DefaultTimeout bounds one scrape's reads from Valkey.
const DefaultTimeout = 5 * time.Second

// CollectorOpts are the options of [NewCollector]; nil means defaults.
type CollectorOpts struct {
	// Queues are the queues to export. Default: every queue of the registry
	// ([bus.Bus.Queues]), read at each scrape.
	Queues []string
	// Tables are the tables to export. Default: every table of the registry ([cache.Tables]),
	// read at each scrape. NoTables exports none.
	Tables   []string
	NoTables bool
	// Timeout bounds one scrape's reads. Default 5 s ([DefaultTimeout]).
	Timeout time.Duration
	// PropagationBuckets are the upper bounds, in seconds, of the tables' propagation
	// histogram. Default [DefaultPropagationBuckets].
	PropagationBuckets []float64
}

// DefaultPropagationBuckets are the buckets of the tables' propagation histogram, in
// seconds: 100 µs to about 1.6 s, doubling.
var DefaultPropagationBuckets = prometheus.ExponentialBuckets(0.0001, 2, 15)

// Collector is a prometheus.Collector of queues and tables, read from what every process
// publishes in Valkey (see the package doc for the metrics). It is safe for concurrent
// scrapes.
type Collector struct {
	b    *bus.Bus
	opts CollectorOpts
	sums fleetsum.Sums // keeps the fleets' counters from going down when a member leaves
}

// NewCollector returns the collector of the queues and tables b's server holds.
func NewCollector(b *bus.Bus, opts *CollectorOpts) *Collector {
	c := &Collector{b: b}
	if opts != nil {
		c.opts = *opts
	}
	if c.opts.Timeout <= 0 {
		c.opts.Timeout = DefaultTimeout
	}
	if len(c.opts.PropagationBuckets) == 0 {
		c.opts.PropagationBuckets = DefaultPropagationBuckets
	}
	// cumulative walks the bounds in ascending order: sort a copy of the caller's.
	c.opts.PropagationBuckets = slices.Sorted(slices.Values(c.opts.PropagationBuckets))
	return c
}

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

// The descriptions of the collector's metrics.
var (
	qJobs        = desc("echomq_queue_jobs", "Jobs in each of the queue's sets.", "queue", "state")
	qPaused      = desc("echomq_queue_paused", "1 when the queue is paused.", "queue")
	qDeadLimit   = desc("echomq_queue_dead_limit", "The most dead jobs the queue keeps (bus.SetDeadLimit; 0: all). Dead at the limit: each job that dies deletes an older one.", "queue")
	qWaiting     = desc("echomq_queue_waiting_jobs", "Waiting jobs in the lanes' sets (set lanes) and of priority 1 to 3 (set urgent), both counted in echomq_queue_jobs{state=\"pending\"}.", "queue", "set")
	qLanes       = desc("echomq_queue_lanes", "Lanes in the round robin (ready), held back by a rate or RateLimited (held), with claimed jobs (active).", "queue", "state")
	qWorkers     = desc("echomq_queue_workers", "Live workers of the queue that publish stats.", "queue")
	qSlots       = desc("echomq_queue_worker_slots", "The live workers' summed concurrency.", "queue")
	qRunning     = desc("echomq_queue_jobs_running", "Handlers running now.", "queue")
	qClaimed     = desc("echomq_jobs_claimed_total", "Jobs claimed by the queue's workers.", "queue")
	qCompleted   = desc("echomq_jobs_completed_total", "Jobs completed by the queue's workers.", "queue")
	qFailed      = desc("echomq_jobs_failed_total", "Handler failures in the queue's workers (each then retried or dead).", "queue")
	qRetried     = desc("echomq_jobs_retried_total", "Failed jobs scheduled again by the queue's workers.", "queue")
	qDead        = desc("echomq_jobs_dead_total", "Jobs the queue's workers sent to dead.", "queue")
	qSnoozed     = desc("echomq_jobs_snoozed_total", "Jobs snoozed by their handlers.", "queue")
	qHandedBack  = desc("echomq_jobs_handed_back_total", "Jobs handed back to pending without counting a failure.", "queue")
	qStale       = desc("echomq_jobs_stale_total", "Outcomes refused because the job was no longer the worker's (EMQSTALE).", "queue")
	qLeaseLost   = desc("echomq_jobs_lease_lost_total", "Jobs whose heartbeat found the lease lost.", "queue")
	qCancelled   = desc("echomq_jobs_cancelled_total", "Running jobs whose heartbeat found them cancelled (each then failed into dead).", "queue")
	qRateLimited = desc("echomq_jobs_rate_limited_total", "Jobs handed back by a handler's RateLimited, their attempt refunded.", "queue")
	tCaches      = desc("echocache_table_caches", "Live caches that publish the table's stats.", "table")
	tDegraded    = desc("echocache_table_degraded_caches", "Live caches in degraded mode for the table.", "table")
	tHits        = desc("echocache_table_hits_total", "Reads answered by a tier (l1, l2).", "table", "tier")
	tMisses      = desc("echocache_table_misses_total", "Reads that found no tier and went to a fill.", "table")
	tLoads       = desc("echocache_table_loads_total", "Loader calls.", "table")
	tLoadErrors  = desc("echocache_table_load_errors_total", "Loader calls that failed.", "table")
	tLoadSeconds = desc("echocache_table_load_seconds_total", "Time spent in loader calls.", "table")
	tInvSent     = desc("echocache_table_invalidations_sent_total", "Invalidation messages published.", "table")
	tInvReceived = desc("echocache_table_invalidations_received_total", "Invalidation messages received.", "table")
	tGaps        = desc("echocache_table_gaps_total", "Messages that skipped sequence numbers (invalidations lost).", "table")
	tRegressions = desc("echocache_table_regressions_total", "Sequences found gone back in time.", "table")
	tFlushes     = desc("echocache_table_flushes_total", "Whole-table L1 flushes made by the coherence.", "table")
	tPropagation = desc("echocache_table_propagation_seconds", "Delay from a write's script to the receipt of its invalidation, by the receiving cache's clock.", "table")
	tPropMax     = desc("echocache_table_propagation_max_seconds", "The largest propagation delay received.", "table")
	scrapeError  = desc("echocache_scrape_error", "A read of the collector failed.")
)

var allDescs = []*prometheus.Desc{qJobs, qPaused, qDeadLimit, qWaiting, qLanes, qWorkers, qSlots, qRunning, qClaimed, qCompleted, qFailed, qRetried,
	qDead, qSnoozed, qHandedBack, qStale, qLeaseLost, qCancelled, qRateLimited, tCaches, tDegraded, tHits, tMisses, tLoads, tLoadErrors,
	tLoadSeconds, tInvSent, tInvReceived, tGaps, tRegressions, tFlushes, tPropagation, tPropMax}

// Describe sends the descriptions of every metric the collector exports.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs {
		ch <- d
	}
}

// Collect reads the queues and tables and sends their metrics. A failed read is sent as an
// invalid metric, which fails the scrape with the error.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.Timeout)
	defer cancel()
	if err := c.collectQueues(ctx, ch); err != nil {
		ch <- prometheus.NewInvalidMetric(scrapeError, err)
	}
	if c.opts.NoTables {
		return
	}
	if err := c.collectTables(ctx, ch); err != nil {
		ch <- prometheus.NewInvalidMetric(scrapeError, err)
	}
}

func (c *Collector) collectQueues(ctx context.Context, ch chan<- prometheus.Metric) error {
	names := c.opts.Queues
	if names == nil {
		qs, err := c.b.Queues(ctx)
		if err != nil {
			return err
		}
		for _, q := range qs {
			names = append(names, q.Name)
		}
	}
	for _, q := range names {
		counts, err := c.b.Counts(ctx, q)
		if err != nil {
			return err
		}
		fs, err := c.b.WorkerStats(ctx, q)
		if err != nil {
			return err
		}
		gauge := func(d *prometheus.Desc, v float64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{q}, labels...)...)
		}
		counter := func(d *prometheus.Desc, v int64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), q)
		}
		gauge(qJobs, float64(counts.Pending), "pending")
		gauge(qJobs, float64(counts.Active), "active")
		gauge(qJobs, float64(counts.Scheduled), "scheduled")
		gauge(qJobs, float64(counts.Dead), "dead")
		gauge(qPaused, b2f(counts.Paused))
		gauge(qDeadLimit, float64(counts.DeadLimit))
		gauge(qWaiting, float64(counts.InLanes), "lanes")
		gauge(qWaiting, float64(counts.Urgent), "urgent")
		gauge(qLanes, float64(counts.LanesReady), "ready")
		gauge(qLanes, float64(counts.LanesHeld), "held")
		gauge(qLanes, float64(counts.LanesActive), "active")
		gauge(qWorkers, float64(len(fs.Workers)))
		gauge(qSlots, float64(fs.Concurrency))
		t := c.sums.Queue(fs)
		gauge(qRunning, float64(t.Running))
		counter(qClaimed, t.Claimed)
		counter(qCompleted, t.Completed)
		counter(qFailed, t.Failed)
		counter(qRetried, t.Retried)
		counter(qDead, t.Dead)
		counter(qSnoozed, t.Snoozed)
		counter(qHandedBack, t.HandedBack)
		counter(qStale, t.Stale)
		counter(qLeaseLost, t.LeaseLost)
		counter(qCancelled, t.Cancelled)
		counter(qRateLimited, t.RateLimited)
	}
	return nil
}

func (c *Collector) collectTables(ctx context.Context, ch chan<- prometheus.Metric) error {
	client := c.b.Client()
	names := c.opts.Tables
	if names == nil {
		ts, err := cache.Tables(ctx, client)
		if err != nil {
			return err
		}
		for _, t := range ts {
			names = append(names, t.Name)
		}
	}
	for _, name := range names {
		fs, err := cache.ReadStats(ctx, client, name)
		if err != nil {
			return err
		}
		s := c.sums.Table(fs)
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, name)
		}
		counter := func(d *prometheus.Desc, v float64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, append([]string{name}, labels...)...)
		}
		gauge(tCaches, float64(len(fs.Caches)))
		gauge(tDegraded, float64(fs.Degraded))
		counter(tHits, float64(s.L1Hits), "l1")
		counter(tHits, float64(s.L2Hits), "l2")
		counter(tMisses, float64(s.Misses))
		counter(tLoads, float64(s.Loads))
		counter(tLoadErrors, float64(s.LoadErrors))
		counter(tLoadSeconds, s.LoadTime.Seconds())
		counter(tInvSent, float64(s.InvalidationsSent))
		counter(tInvReceived, float64(s.InvalidationsReceived))
		counter(tGaps, float64(s.Gaps))
		counter(tRegressions, float64(s.Regressions))
		counter(tFlushes, float64(s.Flushes))
		m, err := prometheus.NewConstHistogram(tPropagation, uint64(max(s.PropagationCount, 0)), s.PropagationTotal.Seconds(),
			cumulative(s.PropagationHistogram, c.opts.PropagationBuckets), name)
		if err != nil {
			return fmt.Errorf("echoprom: table %s: %w", name, err)
		}
		ch <- m
		gauge(tPropMax, s.PropagationMax.Seconds())
	}
	return nil
}

// cumulative maps the cache's fine histogram onto bounds (seconds, ascending): for each
// bound, the delays in the fine buckets whose top is at most the bound. A fine bucket is
// about 9% wide, so a delay just under a bound may count in the next one.
func cumulative(h []cache.HistogramBucket, bounds []float64) map[float64]uint64 {
	out := make(map[float64]uint64, len(bounds))
	var n uint64
	i := 0
	for _, b := range bounds {
		for i < len(h) && h[i].UpTo.Seconds() <= b {
			n += uint64(max(h[i].Count, 0))
			i++
		}
		out[b] = n
	}
	return out
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
