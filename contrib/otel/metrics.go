package echootel

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/fleetsum"
)

// DefaultTimeout bounds one collection's reads from Valkey.
const DefaultTimeout = 5 * time.Second

// FleetOpts are the options of [ObserveFleet]; nil means defaults.
type FleetOpts struct {
	// Queues are the queues to observe. Default: every queue of the registry, read at each
	// collection.
	Queues []string
	// Tables are the tables to observe. Default: every table of the registry; NoTables
	// observes none.
	Tables   []string
	NoTables bool
	// Timeout bounds one collection's reads. Default 5 s ([DefaultTimeout]).
	Timeout time.Duration
}

// The instruments of ObserveFleet: name, unit, description, and whether it is a counter.
type inst struct {
	name, unit, desc string
	counter          bool
}

var queueInsts = []inst{
	{"echomq.queue.jobs", "{job}", "Jobs in each of the queue's sets.", false},
	{"echomq.queue.paused", "1", "1 when the queue is paused.", false},
	{"echomq.queue.dead_limit", "{job}", "The most dead jobs the queue keeps (bus.SetDeadLimit; 0: all). Dead at the limit: each job that dies deletes an older one.", false},
	{"echomq.queue.waiting_jobs", "{job}", "Waiting jobs in the lanes' sets (echomq.queue.set lanes) and of priority 1 to 3 (urgent), both counted as pending.", false},
	{"echomq.queue.lanes", "{lane}", "Lanes in the round robin (echomq.lane.state ready), held back by a rate or RateLimited (held), with claimed jobs (active).", false},
	{"echomq.queue.workers", "{worker}", "Live workers of the queue that publish stats.", false},
	{"echomq.queue.worker_slots", "{slot}", "The live workers' summed concurrency.", false},
	{"echomq.queue.jobs_running", "{job}", "Handlers running now.", false},
	{"echomq.jobs.claimed", "{job}", "Jobs claimed by the queue's workers.", true},
	{"echomq.jobs.completed", "{job}", "Jobs completed by the queue's workers.", true},
	{"echomq.jobs.failed", "{job}", "Handler failures in the queue's workers.", true},
	{"echomq.jobs.retried", "{job}", "Failed jobs scheduled again.", true},
	{"echomq.jobs.dead", "{job}", "Jobs the queue's workers sent to dead.", true},
	{"echomq.jobs.snoozed", "{job}", "Jobs snoozed by their handlers.", true},
	{"echomq.jobs.handed_back", "{job}", "Jobs handed back without counting a failure.", true},
	{"echomq.jobs.stale", "{job}", "Outcomes refused as stale (EMQSTALE).", true},
	{"echomq.jobs.lease_lost", "{job}", "Jobs whose heartbeat found the lease lost.", true},
	{"echomq.jobs.cancelled", "{job}", "Running jobs whose heartbeat found them cancelled (then dead).", true},
	{"echomq.jobs.rate_limited", "{job}", "Jobs handed back by a handler's RateLimited, their attempt refunded.", true},
}

var tableInsts = []inst{
	{"echocache.table.caches", "{cache}", "Live caches that publish the table's stats.", false},
	{"echocache.table.degraded_caches", "{cache}", "Live caches in degraded mode for the table.", false},
	{"echocache.table.hits", "{read}", "Reads answered by a tier (l1, l2).", true},
	{"echocache.table.misses", "{read}", "Reads that went to a fill.", true},
	{"echocache.table.loads", "{call}", "Loader calls.", true},
	{"echocache.table.load_errors", "{call}", "Loader calls that failed.", true},
	{"echocache.table.load_time", "s", "Time spent in loader calls.", true},
	{"echocache.table.invalidations_sent", "{message}", "Invalidation messages published.", true},
	{"echocache.table.invalidations_received", "{message}", "Invalidation messages received.", true},
	{"echocache.table.gaps", "{message}", "Messages that skipped sequence numbers.", true},
	{"echocache.table.regressions", "{event}", "Sequences found gone back in time.", true},
	{"echocache.table.flushes", "{flush}", "Whole-table L1 flushes made by the coherence.", true},
	{"echocache.table.propagations", "{message}", "Invalidations whose propagation delay was measured.", true},
	{"echocache.table.propagation_time", "s", "Summed delay from a write's script to the receipt of its invalidation.", true},
	{"echocache.table.propagation_max", "s", "The largest propagation delay received.", false},
	{"echocache.table.propagation_p50", "s", "The median propagation delay, from the caches' summed histogram.", false},
	{"echocache.table.propagation_p99", "s", "The 99th percentile propagation delay, from the caches' summed histogram.", false},
}

// ObserveFleet registers, on cfg's meter, observable instruments of the queues and tables
// b's server holds, read at each collection from what every process publishes (see the
// package doc). Unregister the returned registration to stop. A failed read is returned to
// the SDK, which reports it; the collection keeps what was read before it.
func ObserveFleet(b *bus.Bus, cfg Config, opts *FleetOpts) (metric.Registration, error) {
	cfg = cfg.withDefaults()
	var o FleetOpts
	if opts != nil {
		o = *opts
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	meter := cfg.MeterProvider.Meter(ScopeName)
	made := map[string]metric.Float64Observable{}
	var all []metric.Observable
	for _, in := range append(append([]inst(nil), queueInsts...), tableInsts...) {
		var (
			obs metric.Float64Observable
			err error
		)
		if in.counter {
			obs, err = meter.Float64ObservableCounter(in.name, metric.WithUnit(in.unit), metric.WithDescription(in.desc))
		} else {
			obs, err = meter.Float64ObservableGauge(in.name, metric.WithUnit(in.unit), metric.WithDescription(in.desc))
		}
		if err != nil {
			return nil, fmt.Errorf("echootel: %s: %w", in.name, err)
		}
		made[in.name] = obs
		all = append(all, obs)
	}
	f := &fleet{b: b, opts: o, inst: made}
	return meter.RegisterCallback(f.observe, all...)
}

type fleet struct {
	b    *bus.Bus
	opts FleetOpts
	inst map[string]metric.Float64Observable
	sums fleetsum.Sums // keeps the fleets' counters from going down when a member leaves
}

func (f *fleet) observe(ctx context.Context, o metric.Observer) error {
	ctx, cancel := context.WithTimeout(ctx, f.opts.Timeout)
	defer cancel()
	if err := f.observeQueues(ctx, o); err != nil {
		return err
	}
	if f.opts.NoTables {
		return nil
	}
	return f.observeTables(ctx, o)
}

func (f *fleet) observeQueues(ctx context.Context, o metric.Observer) error {
	names := f.opts.Queues
	if names == nil {
		qs, err := f.b.Queues(ctx)
		if err != nil {
			return err
		}
		for _, q := range qs {
			names = append(names, q.Name)
		}
	}
	for _, q := range names {
		c, err := f.b.Counts(ctx, q)
		if err != nil {
			return err
		}
		fs, err := f.b.WorkerStats(ctx, q)
		if err != nil {
			return err
		}
		at := semconv.MessagingDestinationName(q)
		put := func(name string, v float64, extra ...attribute.KeyValue) {
			o.ObserveFloat64(f.inst[name], v, metric.WithAttributes(append([]attribute.KeyValue{at}, extra...)...))
		}
		put("echomq.queue.jobs", float64(c.Pending), StateKey.String("pending"))
		put("echomq.queue.jobs", float64(c.Active), StateKey.String("active"))
		put("echomq.queue.jobs", float64(c.Scheduled), StateKey.String("scheduled"))
		put("echomq.queue.jobs", float64(c.Dead), StateKey.String("dead"))
		paused := 0.0
		if c.Paused {
			paused = 1
		}
		put("echomq.queue.paused", paused)
		put("echomq.queue.dead_limit", float64(c.DeadLimit))
		put("echomq.queue.waiting_jobs", float64(c.InLanes), SetKey.String("lanes"))
		put("echomq.queue.waiting_jobs", float64(c.Urgent), SetKey.String("urgent"))
		put("echomq.queue.lanes", float64(c.LanesReady), LaneKey.String("ready"))
		put("echomq.queue.lanes", float64(c.LanesHeld), LaneKey.String("held"))
		put("echomq.queue.lanes", float64(c.LanesActive), LaneKey.String("active"))
		put("echomq.queue.workers", float64(len(fs.Workers)))
		put("echomq.queue.worker_slots", float64(fs.Concurrency))
		t := f.sums.Queue(fs)
		put("echomq.queue.jobs_running", float64(t.Running))
		put("echomq.jobs.claimed", float64(t.Claimed))
		put("echomq.jobs.completed", float64(t.Completed))
		put("echomq.jobs.failed", float64(t.Failed))
		put("echomq.jobs.retried", float64(t.Retried))
		put("echomq.jobs.dead", float64(t.Dead))
		put("echomq.jobs.snoozed", float64(t.Snoozed))
		put("echomq.jobs.handed_back", float64(t.HandedBack))
		put("echomq.jobs.stale", float64(t.Stale))
		put("echomq.jobs.lease_lost", float64(t.LeaseLost))
		put("echomq.jobs.cancelled", float64(t.Cancelled))
		put("echomq.jobs.rate_limited", float64(t.RateLimited))
	}
	return nil
}

func (f *fleet) observeTables(ctx context.Context, o metric.Observer) error {
	client := f.b.Client()
	names := f.opts.Tables
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
		at := TableKey.String(name)
		put := func(inst string, v float64, extra ...attribute.KeyValue) {
			o.ObserveFloat64(f.inst[inst], v, metric.WithAttributes(append([]attribute.KeyValue{at}, extra...)...))
		}
		s := f.sums.Table(fs)
		put("echocache.table.caches", float64(len(fs.Caches)))
		put("echocache.table.degraded_caches", float64(fs.Degraded))
		put("echocache.table.hits", float64(s.L1Hits), TierKey.String("l1"))
		put("echocache.table.hits", float64(s.L2Hits), TierKey.String("l2"))
		put("echocache.table.misses", float64(s.Misses))
		put("echocache.table.loads", float64(s.Loads))
		put("echocache.table.load_errors", float64(s.LoadErrors))
		put("echocache.table.load_time", s.LoadTime.Seconds())
		put("echocache.table.invalidations_sent", float64(s.InvalidationsSent))
		put("echocache.table.invalidations_received", float64(s.InvalidationsReceived))
		put("echocache.table.gaps", float64(s.Gaps))
		put("echocache.table.regressions", float64(s.Regressions))
		put("echocache.table.flushes", float64(s.Flushes))
		put("echocache.table.propagations", float64(s.PropagationCount))
		put("echocache.table.propagation_time", s.PropagationTotal.Seconds())
		put("echocache.table.propagation_max", s.PropagationMax.Seconds())
		put("echocache.table.propagation_p50", s.PropagationP50.Seconds())
		put("echocache.table.propagation_p99", s.PropagationP99.Seconds())
	}
	return nil
}
