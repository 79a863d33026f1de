// Package echoprom exports EchoMQ queues and EchoCache tables to Prometheus.
//
// Two collectors, registered on the user's registry:
//
//   - [Collector] reads, at each scrape, what every process publishes in Valkey: each queue's
//     set sizes (one atomic snapshot, [bus.Bus.Counts]) and its live workers' counters
//     ([bus.Bus.WorkerStats]), each table's counters summed over its live caches
//     ([cache.ReadStats]). One exporter anywhere shows the whole fleet.
//
//   - [JobMetrics] observes, in the worker's process, what no published counter can carry:
//     histograms of job run time and of queue wait. Install its [JobMetrics.Middleware] in
//     bus.WorkerConfig.Middleware.
//
//     reg := prometheus.NewRegistry()
//     reg.MustRegister(echoprom.NewCollector(b, nil))
//     jobs := echoprom.NewJobMetrics(nil)
//     reg.MustRegister(jobs)
//     w, _ := bus.NewWorker(b, bus.WorkerConfig{Queue: "emails", Middleware: []bus.Middleware{jobs.Middleware()}})
//     http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// # Metrics
//
// Queues (label queue). The counters are sums over the queue's workers that only grow while
// the collector runs: a live worker counts what it reports now, and one that stopped (or
// restarted, its counters from zero) keeps counting what it had reported last, remembered
// by the collector for an hour and then folded into the queue's sum. So a deploy that
// replaces every worker shows no drop, which rate() would take for a counter reset and
// count as a spike; a new collector process starts from the live workers (one reset).
// Tables' counters are summed over their caches the same way.
//
//	echomq_queue_jobs{queue,state}            gauge: jobs in state pending, active, scheduled, dead
//	echomq_queue_paused{queue}                gauge: 1 when paused
//	echomq_queue_waiting_jobs{queue,set}      gauge: waiting jobs of the lanes' sets (set lanes) and
//	                                          of priority 1 to 3 (set urgent), both in state pending
//	echomq_queue_lanes{queue,state}           gauge: lanes ready (in the round robin), held (by a
//	                                          rate or RateLimited), active (with claimed jobs)
//	echomq_queue_workers{queue}               gauge: live workers publishing stats
//	echomq_queue_worker_slots{queue}          gauge: their summed concurrency
//	echomq_queue_jobs_running{queue}          gauge: handlers running now
//	echomq_jobs_claimed_total{queue}          counter
//	echomq_jobs_completed_total{queue}        counter
//	echomq_jobs_failed_total{queue}           counter: handler failures (each then retried or dead)
//	echomq_jobs_retried_total{queue}          counter
//	echomq_jobs_dead_total{queue}             counter: jobs the workers sent to dead
//	echomq_jobs_snoozed_total{queue}          counter
//	echomq_jobs_handed_back_total{queue}      counter
//	echomq_jobs_stale_total{queue}            counter: outcomes answered EMQSTALE
//	echomq_jobs_lease_lost_total{queue}       counter
//	echomq_jobs_cancelled_total{queue}        counter: running jobs cancelled (then dead)
//	echomq_jobs_rate_limited_total{queue}     counter: jobs handed back by RateLimited
//
// Jobs, from [JobMetrics] (labels queue, kind; outcome is completed, failed, snoozed or
// rate_limited, as [Outcome] reads the handler's result, or handed_back for a failure after
// Close's deadline cancelled the handler, which the worker hands back):
//
//	echomq_job_run_seconds{queue,kind,outcome}  histogram: handler run time
//	echomq_job_wait_seconds{queue,kind}         histogram: first claim minus the mint time
//	                                            the job id carries (a delayed job's delay included)
//
// Tables (label table; the counters summed over the table's caches as the queues' are):
//
//	echocache_table_caches{table}                      gauge: live caches publishing the table
//	echocache_table_degraded_caches{table}             gauge: those in degraded mode
//	echocache_table_hits_total{table,tier}             counter: reads answered by tier l1 or l2
//	echocache_table_misses_total{table}                counter: reads that went to a fill
//	echocache_table_loads_total{table}                 counter: loader calls
//	echocache_table_load_errors_total{table}           counter
//	echocache_table_load_seconds_total{table}          counter: time spent in loaders
//	echocache_table_invalidations_sent_total{table}    counter
//	echocache_table_invalidations_received_total{table} counter
//	echocache_table_gaps_total{table}                  counter: messages that skipped sequence numbers
//	echocache_table_regressions_total{table}           counter
//	echocache_table_flushes_total{table}               counter: whole-table L1 flushes
//	echocache_table_propagation_seconds{table}         histogram: write to receipt of its invalidation
//	                                                   (CollectorOpts.PropagationBuckets)
//	echocache_table_propagation_max_seconds{table}     gauge: the largest such delay
//
// A read that fails (the server unreachable) makes the scrape fail with the error, rather
// than report partial numbers as if they were whole.
package echoprom
