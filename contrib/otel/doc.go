// Package echootel traces and measures EchoMQ with OpenTelemetry.
//
// Tracing: the producer's span context travels inside the job, in the envelope's header
// block (bus.WithHeaders; FORMAT envelope in PROTOCOL.md) as W3C traceparent and tracestate,
// which any runtime can read. [Telemetry.EnqueueTask] (or [Telemetry.Inject] for payloads
// built by hand) starts a "send <queue>" span of kind producer and injects it;
// [Telemetry.Middleware], installed in bus.WorkerConfig.Middleware, extracts it and runs the
// handler in a "process <queue>" span of kind consumer, a child of the producer's span (one
// trace across processes) with a link to it as the messaging conventions ask; whatever else
// Config.Propagator carries (baggage, with a composite propagator) reaches the handler's
// context too. Both carry the
// OpenTelemetry messaging semantic-convention attributes: messaging.system "echomq",
// messaging.destination.name (the queue), messaging.operation.name and .type (send,
// process), messaging.message.id (the JOB id), messaging.message.body.size, and
// echomq.job.kind and echomq.job.attempt.
//
// Metrics, equivalent to package contrib/prometheus's (an OTel name for each Prometheus
// name: dots for underscores, no _total, the unit in the instrument):
//
//   - [Telemetry.Middleware] records the histograms echomq.job.run.duration (s; attributes
//     messaging.destination.name, echomq.job.kind, echomq.job.outcome: completed, failed,
//     snoozed or rate_limited, as [Outcome] reads the handler's result, or handed_back for a
//     failure after Close's deadline cancelled the handler, which the worker hands back) and
//     echomq.job.wait.duration (s; first claims only: claim time minus the mint time the id
//     carries).
//   - [ObserveFleet] registers observable instruments read from what every process publishes
//     in Valkey, at each collection: echomq.queue.jobs (attribute echomq.job.state),
//     echomq.queue.paused, echomq.queue.dead_limit, echomq.queue.waiting_jobs (attribute
//     echomq.queue.set: lanes, urgent), echomq.queue.lanes (attribute echomq.lane.state:
//     ready, held, active), echomq.queue.workers, echomq.queue.worker_slots,
//     echomq.queue.jobs_running, the counters echomq.jobs.claimed, .completed, .failed,
//     .retried, .dead, .snoozed, .handed_back, .stale, .lease_lost, .cancelled,
//     .rate_limited; and per table (attribute echocache.table) echocache.table.caches,
//     .degraded_caches, .hits (attribute echocache.tier), .misses, .loads, .load_errors,
//     .load_time (s), .invalidations_sent, .invalidations_received, .gaps, .regressions,
//     .flushes, .propagations, .propagation_time (s), .propagation_max (s), and
//     .propagation_p50 and .propagation_p99 (s), read from the caches' published histogram
//     (OpenTelemetry has no asynchronous histogram, so the quantiles stand for the buckets
//     Prometheus's collector exports).
//
// The counters are sums over a queue's workers (a table's caches) that only grow while the
// process observing them runs: a worker that stopped, or restarted with its counters from
// zero, keeps counting what it reported last (remembered for an hour, then folded into the
// queue's sum), so a deploy that replaces the fleet shows no drop, which a cumulative backend
// would read as a reset and a delta exporter as a negative delta.
package echootel
