package main

import "github.com/echocache/echocache/bench"

// The mapping: each row of the report names the benchmarks it divides. A
// row whose benchmark is absent from the input is printed as "not
// measured", never estimated, so the rows for code that is not written yet
// sit here already and fill in when their benchmark appears.
//
// Benchmark names are as `go test -bench` prints them without the
// -GOMAXPROCS suffix. A sub-benchmark name must not end in -<digits>, which
// would be taken for that suffix.

// Benchmarks of our own code, in the core module's bench/ package (one in
// bench/peers, where asynq is). None is written yet: each is expected under
// exactly this name, and expectedOurs below says what each must measure.
// Adding one is writing the benchmark; its rows fill in by themselves.
const (
	oursL1Serial      = "BenchmarkCacheL1Hit/serial"
	oursL1Parallel    = "BenchmarkCacheL1Hit/parallel"
	oursL2Serial      = "BenchmarkCacheL2Hit/serial"
	oursL2Parallel    = "BenchmarkCacheL2Hit/parallel"
	oursMissFill      = "BenchmarkCacheMissFill"
	oursGetMany       = "BenchmarkCacheGetMany"
	oursGetManyMsgp   = "BenchmarkCacheGetManyMsgpack"
	oursInvalidation  = "BenchmarkCacheInvalidation"
	oursEnqueue       = "BenchmarkBusEnqueue/single"
	oursEnqueueBatch  = "BenchmarkBusEnqueue/batch"
	oursClaimComplete = "BenchmarkBusClaimComplete"
	oursJobs1         = "BenchmarkBusJobs/c=1"
	oursJobs8         = "BenchmarkBusJobs/c=8"
	oursJobs20        = "BenchmarkBusJobs/c=20"
	oursJobs100       = "BenchmarkBusJobs/c=100"
	oursCeiling       = "BenchmarkBusCeiling"
	oursLanes20       = "BenchmarkBusJobsLanes/c=20"
	oursLanes100      = "BenchmarkBusJobsLanes/c=100"
	oursNoPrefetch20  = "BenchmarkBusJobsNoPrefetch/c=20"

	// Interleaved comparisons (bench.Compare), each reporting a ratio that
	// survives the machine's noise; the rows take their ratio from these.
	oursCmpL1            = "BenchmarkCompareL1"
	oursCmpL2            = "BenchmarkCompareL2"
	oursCmpMissFill      = "BenchmarkCompareMissFill"
	oursCmpGetMany       = "BenchmarkCompareGetMany"
	oursCmpGetManyMsgp   = "BenchmarkCompareGetManyMsgpack"
	oursCmpClaimComplete = "BenchmarkCompareClaimComplete"
	oursCmpEnqueue       = "BenchmarkCompareEnqueue" // in bench/peers: asynq is there
	oursCmpInval         = "BenchmarkCompareInvalidation"
	oursCmpInvalCSC      = "BenchmarkCompareInvalidationCSC" // in bench/peers
	oursCmpLanes20       = "BenchmarkCompareJobsLanes/c=20"
	oursCmpLanes100      = "BenchmarkCompareJobsLanes/c=100"
)

// Baselines (core module, bench/baseline_test.go).
const (
	baseRistrettoSerial   = "BenchmarkRistrettoGet/serial"
	baseRistrettoParallel = "BenchmarkRistrettoGet/parallel"
	baseGetSerial         = "BenchmarkValkeyGet/serial"
	baseGetParallel       = "BenchmarkValkeyGet/parallel"
	baseMissFill          = "BenchmarkValkeyMissFill"
	baseMGet              = "BenchmarkValkeyMGet"
	basePubSub            = "BenchmarkPubSubRoundTrip"
	baseCmpAA             = "BenchmarkCompareGetAA"
	baseCmpTierGap        = "BenchmarkCompareTierGap"
)

// Peers (nested module bench/peers).
const (
	peerDoCacheSerial   = "BenchmarkValkeyDoCacheHit/serial"
	peerDoCacheParallel = "BenchmarkValkeyDoCacheHit/parallel"
	peerDoCacheRaw      = "BenchmarkValkeyDoCacheHit/raw-bytes"
	peerCSCInval        = "BenchmarkValkeyCSCInvalidation"
	peerGoRedisLocal    = "BenchmarkGoRedisCacheLocalHit"
	peerGoRedisRemote   = "BenchmarkGoRedisCacheRemoteHit"
	peerAsynqEnqueue    = "BenchmarkAsynqEnqueue"
	peerAsynqJobs1      = "BenchmarkAsynqJobs/c=1"
	peerAsynqJobs8      = "BenchmarkAsynqJobs/c=8"
	peerAsynqJobs20     = "BenchmarkAsynqJobs/c=20"
	peerAsynqJobs100    = "BenchmarkAsynqJobs/c=100"
	// BullMQ runs in Node: bench/peers/bullmq/jobs.mjs prints these lines.
	peerBullMQJobs1   = "BenchmarkBullMQJobs/c=1"
	peerBullMQJobs8   = "BenchmarkBullMQJobs/c=8"
	peerBullMQJobs20  = "BenchmarkBullMQJobs/c=20"
	peerBullMQJobs100 = "BenchmarkBullMQJobs/c=100"
	peerCmpGoRedis    = "BenchmarkCompareGoRedisRemote"
	peerCmpAsynq      = "BenchmarkCompareAsynqEnqueue"
	peerCmpCSC        = "BenchmarkCompareCSCPubSub"
)

const (
	unitNs   = "ns/op"
	unitP50  = bench.UnitP50
	unitP99  = bench.UnitP99
	unitJobs = bench.UnitJobsPerSec
)

// cmp is the ratio of a bench.Compare benchmark.
func cmp(name string) *ref { return &ref{name, bench.UnitRatio} }

// cmpP50 and cmpP99 are the percentile ratios of a bench.CompareLatency
// benchmark.
func cmpP50(name string) *ref { return &ref{name, bench.UnitP50Ratio} }
func cmpP99(name string) *ref { return &ref{name, bench.UnitP99Ratio} }

// ns is the ns/op of a benchmark.
func ns(name string) measure { return measure{num: ref{name, unitNs}} }

// metric is a reported metric of a benchmark.
func metric(name, unit string) measure { return measure{num: ref{name, unit}} }

// quot is a/b in ns/op, round by round: a dimensionless factor.
func quot(a, b string) measure {
	return measure{num: ref{a, unitNs}, den: &ref{b, unitNs}}
}

// expected is a benchmark of ours that rows wait for, and what it must
// measure: the comparison is only fair if it measures what its baseline
// measures.
type expected struct {
	name, where, what string
}

// expectedOurs lists every benchmark of ours the rows use, in report order.
var expectedOurs = []expected{
	{oursL1Serial, core, "Table[int64, bench.Row].Get of one key held in L1 (the key and row of BenchmarkRistrettoGet, whose ristretto is shaped as the table's L1: int64 key, *Row value, cost 1); b.ReportAllocs; serial b.Loop"},
	{oursL1Parallel, core, "the same under b.RunParallel"},
	{oursCmpL1, core, `bench.Compare(b, Side{"ours", Table.Get of the L1 key}, Side{"ristretto", raw ristretto Get of the same key}); the L1 row's ratio`},
	{oursL2Serial, core, "Table.Get with L1 disabled, row present in L2 (same row bytes as BenchmarkValkeyGet), decoded to bench.Row"},
	{oursL2Parallel, core, "the same under b.RunParallel"},
	{oursCmpL2, core, `bench.Compare(b, Side{"ours", Table.Get with L1 off}, Side{"get", raw GET of the same row}); the L2 row's ratio`},
	{oursMissFill, core, "Table.Get of an id not seen before with a loader that returns bench.SampleRow at once: lease, load, fill (baseline: GET nil + SET PX)"},
	{oursCmpMissFill, core, `bench.Compare of the same against Side{"raw", GET nil + SET PX of a new id}`},
	{oursGetMany, core, "Table.GetMany of 100 ids all present in L2, L1 disabled; ns/op per call (baseline: one MGET of 100 rows)"},
	{oursCmpGetMany, core, `bench.Compare of the same against Side{"mget", one MGET of the 100 rows}`},
	{oursGetManyMsgp, core, "the same over a table with the cache.Msgpack codec"},
	{oursCmpGetManyMsgp, core, `bench.Compare of the same against Side{"mget", one MGET of its 100 rows}`},
	{oursInvalidation, core, "Invalidate in one cache object until the other's L1 entry is dropped; p50-ns/p99-ns from bench.Latencies over that span (write sent → remote drop), as BenchmarkPubSubRoundTrip"},
	{oursCmpInval, core, `bench.CompareLatency(b, LatencySide{"ours", that span}, bench.PubSubRoundTrip(...)); the propagation rows' ratios vs raw pub/sub`},
	{oursCmpInvalCSC, peersMod, `bench.CompareLatency(b, LatencySide{"ours", that span}, cscInvalidation(b)) in bench/peers; the ratios vs valkey-go CSC`},
	{oursEnqueue, core, "one job enqueued per op (payload as the peers' jobPayload)"},
	{oursCmpEnqueue, peersMod, `bench.Compare(b, Side{"ours", enqueue one job}, Side{"asynq", asynq Client.Enqueue}) in bench/peers, which imports our packages`},
	{oursEnqueueBatch, core, "jobs enqueued in batches of 100; ns/op per job (b.N jobs in total)"},
	{oursClaimComplete, core, "claim one pending job and complete it with its token; ns/op per job"},
	{oursCmpClaimComplete, core, `bench.Compare of the same against Side{"get", a raw GET}`},
	{oursJobs1, core, "b.N jobs enqueued before the timer; a worker with concurrency 1 and a no-op handler; the timer stops at the b.N-th completion; reports jobs/s (as BenchmarkAsynqJobs)"},
	{oursJobs8, core, "the same with concurrency 8"},
	{oursJobs20, core, "the same with concurrency 20"},
	{oursJobs100, core, "the same with concurrency 100"},
	{oursCeiling, core, "the batched protocol's ceiling, no worker: b.N jobs enqueued before the timer (100 per call), then claim 100 and completemany the 100 per call until empty; reports jobs/s"},
	{oursLanes20, core, "BenchmarkBusJobs/c=20 with the b.N jobs spread evenly over 100 lanes (enqueued lane after lane): claims through laneclaim's round robin; reports jobs/s"},
	{oursLanes100, core, "the same with concurrency 100"},
	{oursCmpLanes20, core, "drains of 5×b.N jobs without and with 100 lanes, concurrency 20, alternating (three pairs); ratio: the median over the pairs of jobs/s with lanes ÷ without; the lanes rows' ratio"},
	{oursCmpLanes100, core, "the same with concurrency 100"},
	{oursNoPrefetch20, core, "BenchmarkBusJobs/c=20 with WorkerConfig.Prefetch -1: no prefetch buffer (the default sizes one automatically); reports jobs/s"},
}

// Where a benchmark of ours goes.
const (
	core     = "bench/"
	peersMod = "bench/peers/"
)

// isOurs reports whether name is a benchmark of our code.
func isOurs(name string) bool {
	for _, e := range expectedOurs {
		if e.name == name {
			return true
		}
	}
	return false
}

// rows is the report, in order.
var rows = []row{
	// EchoCache read path.
	{id: "l1-hit-serial", section: secCache, name: "L1 hit, serial: Table.Get ÷ raw ristretto Get", subject: ns(oursL1Serial), other: ptr(ns(baseRistrettoSerial)), paired: cmp(oursCmpL1), seed: bench.SeedL1HitNs, better: lower, guard: true, target: "≤ 1.5×"},
	{id: "l1-hit-parallel", section: secCache, name: "L1 hit, parallel: Table.Get ÷ raw ristretto Get", subject: ns(oursL1Parallel), other: ptr(ns(baseRistrettoParallel)), better: lower, guard: true},
	{id: "l1-scaling", section: secCache, name: "L1 parallel speed-up (serial ÷ parallel ns/op), ours ÷ ristretto's", subject: quot(oursL1Serial, oursL1Parallel), other: ptr(quot(baseRistrettoSerial, baseRistrettoParallel)), better: higher, target: "≈ GOMAXPROCS"},
	{id: "l1-vs-docache", section: secCache, name: "L1 hit ÷ valkey-go DoCache hit (decoded row)", subject: ns(oursL1Serial), other: ptr(ns(peerDoCacheSerial)), better: lower, guard: true},
	{id: "l1-vs-goredis", section: secCache, name: "L1 hit ÷ go-redis/cache local hit", subject: ns(oursL1Serial), other: ptr(ns(peerGoRedisLocal)), better: lower, guard: true},
	{id: "l2-hit-serial", section: secCache, name: "L2 hit, serial (L1 off): Table.Get ÷ raw GET", subject: ns(oursL2Serial), other: ptr(ns(baseGetSerial)), paired: cmp(oursCmpL2), seed: bench.SeedL2GetNs, better: lower, guard: true, target: "≤ 1.15×"},
	{id: "l2-hit-parallel", section: secCache, name: "L2 hit, parallel (L1 off): Table.Get ÷ raw GET", subject: ns(oursL2Parallel), other: ptr(ns(baseGetParallel)), better: lower, guard: true},
	{id: "l2-vs-goredis", section: secCache, name: "L2 hit ÷ go-redis/cache remote hit", subject: ns(oursL2Serial), other: ptr(ns(peerGoRedisRemote)), better: lower, guard: true},
	{id: "tier-gap", section: secCache, name: "L2 hit ÷ L1 hit (the tier gap), ours ÷ raw GET ÷ raw ristretto", subject: quot(oursL2Serial, oursL1Serial), other: ptr(quot(baseGetSerial, baseRistrettoSerial)), seed: bench.SeedL1L2Ratio},
	{id: "miss-fill", section: secCache, name: "miss and fill (loader returns at once) ÷ raw GET miss + SET PX", subject: ns(oursMissFill), other: ptr(ns(baseMissFill)), paired: cmp(oursCmpMissFill), better: lower, guard: true, target: "≤ 1.5×"},
	{id: "getmany", section: secCache, name: "GetMany of 100 L2 rows ÷ raw MGET of 100", subject: ns(oursGetMany), other: ptr(ns(baseMGet)), paired: cmp(oursCmpGetMany), better: lower, guard: true, target: "≤ 2.5×"},
	{id: "getmany-msgpack", section: secCache, name: "GetMany of 100 L2 rows, msgpack codec ÷ raw MGET of 100", subject: ns(oursGetManyMsgp), other: ptr(ns(baseMGet)), paired: cmp(oursCmpGetManyMsgp), better: lower, guard: true, target: "≤ 1.5×"},
	{id: "inval-p50-raw", section: secCache, name: "invalidation propagation p50 ÷ raw SPUBLISH→receive p50", subject: metric(oursInvalidation, unitP50), other: ptr(metric(basePubSub, unitP50)), paired: cmpP50(oursCmpInval), better: lower, guard: true},
	{id: "inval-p99-raw", section: secCache, name: "invalidation propagation p99 ÷ raw SPUBLISH→receive p99", subject: metric(oursInvalidation, unitP99), other: ptr(metric(basePubSub, unitP99)), paired: cmpP99(oursCmpInval), better: lower, guard: true, target: "≤ 1.5×"},
	{id: "inval-p50-csc", section: secCache, name: "invalidation propagation p50 ÷ valkey-go CSC invalidation p50", subject: metric(oursInvalidation, unitP50), other: ptr(metric(peerCSCInval, unitP50)), paired: cmpP50(oursCmpInvalCSC), better: lower, guard: true},
	{id: "inval-p99-csc", section: secCache, name: "invalidation propagation p99 ÷ valkey-go CSC invalidation p99", subject: metric(oursInvalidation, unitP99), other: ptr(metric(peerCSCInval, unitP99)), paired: cmpP99(oursCmpInvalCSC), better: lower, guard: true, target: "≤ 1.5×"},

	// EchoMQ bus.
	{id: "enqueue-single", section: secBus, name: "enqueue, one job ÷ asynq Enqueue", subject: ns(oursEnqueue), other: ptr(ns(peerAsynqEnqueue)), paired: cmp(oursCmpEnqueue), better: lower, guard: true},
	{id: "enqueue-batch", section: secBus, name: "enqueue in batches of 100, per job ÷ asynq Enqueue", subject: ns(oursEnqueueBatch), other: ptr(ns(peerAsynqEnqueue)), better: lower, guard: true},
	{id: "claim-complete", section: secBus, name: "claim + complete, per job ÷ one raw GET round trip", subject: ns(oursClaimComplete), other: ptr(ns(baseGetSerial)), paired: cmp(oursCmpClaimComplete), better: lower, guard: true},
	{id: "jobs-c1", section: secBus, name: "end-to-end jobs/s, concurrency 1 ÷ asynq", subject: metric(oursJobs1, unitJobs), other: ptr(metric(peerAsynqJobs1, unitJobs)), better: higher, guard: true},
	{id: "jobs-c8", section: secBus, name: "end-to-end jobs/s, concurrency 8 ÷ asynq", subject: metric(oursJobs8, unitJobs), other: ptr(metric(peerAsynqJobs8, unitJobs)), better: higher, guard: true},
	{id: "jobs-c20", section: secBus, name: "end-to-end jobs/s, concurrency 20 ÷ asynq", subject: metric(oursJobs20, unitJobs), other: ptr(metric(peerAsynqJobs20, unitJobs)), better: higher, guard: true},
	{id: "jobs-c100", section: secBus, name: "end-to-end jobs/s, concurrency 100 ÷ asynq", subject: metric(oursJobs100, unitJobs), other: ptr(metric(peerAsynqJobs100, unitJobs)), better: higher, guard: true},
	{id: "jobs-c20-bullmq", section: secBus, name: "end-to-end jobs/s, concurrency 20 ÷ BullMQ", subject: metric(oursJobs20, unitJobs), other: ptr(metric(peerBullMQJobs20, unitJobs)), better: higher, guard: true, target: "≥ 5×"},
	{id: "jobs-c100-bullmq", section: secBus, name: "end-to-end jobs/s, concurrency 100 ÷ BullMQ", subject: metric(oursJobs100, unitJobs), other: ptr(metric(peerBullMQJobs100, unitJobs)), better: higher, guard: true},
	{id: "jobs-c20-prefetch", section: secBus, name: "end-to-end jobs/s, concurrency 20 (the automatic prefetch buffer) ÷ the same with no buffer (Prefetch -1)", subject: metric(oursJobs20, unitJobs), other: ptr(metric(oursNoPrefetch20, unitJobs)), better: higher, guard: true},
	{id: "jobs-c20-lanes", section: secBus, name: "end-to-end jobs/s with 100 active lanes, concurrency 20 ÷ the same jobs without lanes", subject: metric(oursLanes20, unitJobs), other: ptr(metric(oursJobs20, unitJobs)), paired: cmp(oursCmpLanes20), better: higher, guard: true, target: "≥ 0.8×"},
	{id: "jobs-c100-lanes", section: secBus, name: "end-to-end jobs/s with 100 active lanes, concurrency 100 ÷ the same jobs without lanes", subject: metric(oursLanes100, unitJobs), other: ptr(metric(oursJobs100, unitJobs)), paired: cmp(oursCmpLanes100), better: higher, guard: true, target: "≥ 0.8×"},
	{id: "jobs-c100-ceiling", section: secBus, name: "end-to-end jobs/s, concurrency 100 ÷ the batched protocol (claim + completemany of 100 per call, no worker)", subject: metric(oursJobs100, unitJobs), other: ptr(metric(oursCeiling, unitJobs)), better: higher, guard: true, target: "≥ 0.6×"},

	// Baselines and peers on their own.
	{id: "base-ristretto", section: secContext, name: "raw ristretto Get, serial (vs the seed's L1 hit)", subject: ns(baseRistrettoSerial), seed: bench.SeedL1HitNs},
	{id: "base-get", section: secContext, name: "raw valkey-go GET, serial (vs the seed's L2 GET)", subject: ns(baseGetSerial), seed: bench.SeedL2GetNs},
	{id: "base-aa", section: secContext, name: "A/A: raw GET ÷ raw GET, interleaved (the noise floor of every interleaved ratio)", subject: metric(baseCmpAA, "a-ns/op"), other: ptr(metric(baseCmpAA, "b-ns/op")), paired: cmp(baseCmpAA), target: "1×"},
	{id: "base-tier-gap", section: secContext, name: "raw GET ÷ raw ristretto Get: the tier gap (the seed's 40×)", subject: ns(baseGetSerial), other: ptr(ns(baseRistrettoSerial)), paired: cmp(baseCmpTierGap), seed: bench.SeedL1L2Ratio, seedOnRatio: true},
	{id: "base-ristretto-scaling", section: secContext, name: "raw ristretto parallel speed-up (serial ÷ parallel)", subject: quot(baseRistrettoSerial, baseRistrettoParallel)},
	{id: "base-get-parallel", section: secContext, name: "raw GET, parallel ÷ serial (auto-pipelining)", subject: ns(baseGetParallel), other: ptr(ns(baseGetSerial)), better: lower},
	{id: "base-missfill", section: secContext, name: "raw GET miss + SET PX ÷ raw GET", subject: ns(baseMissFill), other: ptr(ns(baseGetSerial)), better: lower},
	{id: "base-mget", section: secContext, name: "raw MGET of 100 ÷ raw GET", subject: ns(baseMGet), other: ptr(ns(baseGetSerial)), better: lower},
	{id: "base-pubsub-p50", section: secContext, name: "raw SPUBLISH→receive p50 ÷ raw GET", subject: metric(basePubSub, unitP50), other: ptr(ns(baseGetSerial)), better: lower},
	{id: "base-pubsub-p99", section: secContext, name: "raw SPUBLISH→receive p99 ÷ raw GET", subject: metric(basePubSub, unitP99), other: ptr(ns(baseGetSerial)), better: lower},
	{id: "peer-docache", section: secContext, name: "valkey-go DoCache hit, decoded ÷ raw ristretto Get", subject: ns(peerDoCacheSerial), other: ptr(ns(baseRistrettoSerial)), better: lower},
	{id: "peer-docache-parallel", section: secContext, name: "valkey-go DoCache hit, decoded, parallel ÷ raw ristretto Get, parallel", subject: ns(peerDoCacheParallel), other: ptr(ns(baseRistrettoParallel)), better: lower},
	{id: "peer-docache-raw", section: secContext, name: "valkey-go DoCache hit, bytes only ÷ raw ristretto Get", subject: ns(peerDoCacheRaw), other: ptr(ns(baseRistrettoSerial)), better: lower},
	{id: "peer-goredis-local", section: secContext, name: "go-redis/cache local hit ÷ raw ristretto Get", subject: ns(peerGoRedisLocal), other: ptr(ns(baseRistrettoSerial)), better: lower},
	{id: "peer-goredis-remote", section: secContext, name: "go-redis/cache remote hit ÷ raw GET", subject: ns(peerGoRedisRemote), other: ptr(ns(baseGetSerial)), paired: cmp(peerCmpGoRedis), better: lower},
	{id: "peer-csc-p50", section: secContext, name: "valkey-go CSC invalidation p50 ÷ raw SPUBLISH→receive p50", subject: metric(peerCSCInval, unitP50), other: ptr(metric(basePubSub, unitP50)), paired: cmpP50(peerCmpCSC), better: lower},
	{id: "peer-csc-p99", section: secContext, name: "valkey-go CSC invalidation p99 ÷ raw SPUBLISH→receive p99", subject: metric(peerCSCInval, unitP99), other: ptr(metric(basePubSub, unitP99)), paired: cmpP99(peerCmpCSC), better: lower},
	{id: "peer-asynq-enqueue", section: secContext, name: "asynq Enqueue ÷ raw GET", subject: ns(peerAsynqEnqueue), other: ptr(ns(baseGetSerial)), paired: cmp(peerCmpAsynq), better: lower},
	{id: "peer-asynq-c1", section: secContext, name: "asynq end-to-end jobs/s, concurrency 1", subject: metric(peerAsynqJobs1, unitJobs)},
	{id: "peer-asynq-c8", section: secContext, name: "asynq end-to-end jobs/s, concurrency 8", subject: metric(peerAsynqJobs8, unitJobs)},
	{id: "peer-asynq-c20", section: secContext, name: "asynq end-to-end jobs/s, concurrency 20", subject: metric(peerAsynqJobs20, unitJobs)},
	{id: "peer-asynq-c100", section: secContext, name: "asynq end-to-end jobs/s, concurrency 100", subject: metric(peerAsynqJobs100, unitJobs)},
	{id: "peer-bullmq-c1", section: secContext, name: "BullMQ end-to-end jobs/s, concurrency 1", subject: metric(peerBullMQJobs1, unitJobs)},
	{id: "peer-bullmq-c8", section: secContext, name: "BullMQ end-to-end jobs/s, concurrency 8", subject: metric(peerBullMQJobs8, unitJobs)},
	{id: "peer-bullmq-c20", section: secContext, name: "BullMQ end-to-end jobs/s, concurrency 20", subject: metric(peerBullMQJobs20, unitJobs)},
	{id: "peer-bullmq-c100", section: secContext, name: "BullMQ end-to-end jobs/s, concurrency 100", subject: metric(peerBullMQJobs100, unitJobs)},
	{id: "bus-ceiling", section: secContext, name: "EchoMQ batched protocol ceiling, jobs/s (claim + completemany of 100 per call, no worker)", subject: metric(oursCeiling, unitJobs)},
}

// chartBars are the bars of the SVG chart, top to bottom: the tiers of ours,
// then the baselines, then the peers. Throughput is drawn as time per job.
var chartBars = []chartBar{
	{group: groupOurs, label: "L1 hit (Table.Get)", m: ns(oursL1Serial)},
	{group: groupOurs, label: "L2 hit (Table.Get, L1 off)", m: ns(oursL2Serial)},
	{group: groupOurs, label: "loader: miss and fill", m: ns(oursMissFill)},
	{group: groupOurs, label: "invalidation p50", m: metric(oursInvalidation, unitP50)},
	{group: groupOurs, label: "bus enqueue", m: ns(oursEnqueue)},
	{group: groupOurs, label: "bus, per job at c=20", m: metric(oursJobs20, unitJobs), perJob: true},
	{group: groupOurs, label: "bus, per job at c=100", m: metric(oursJobs100, unitJobs), perJob: true},
	{group: groupBase, label: "raw ristretto Get", m: ns(baseRistrettoSerial)},
	{group: groupBase, label: "raw GET", m: ns(baseGetSerial)},
	{group: groupBase, label: "raw GET miss + SET PX", m: ns(baseMissFill)},
	{group: groupBase, label: "raw SPUBLISH→receive p50", m: metric(basePubSub, unitP50)},
	{group: groupPeer, label: "valkey-go DoCache hit (decoded)", m: ns(peerDoCacheSerial)},
	{group: groupPeer, label: "go-redis/cache local hit", m: ns(peerGoRedisLocal)},
	{group: groupPeer, label: "go-redis/cache remote hit", m: ns(peerGoRedisRemote)},
	{group: groupPeer, label: "valkey-go CSC invalidation p50", m: metric(peerCSCInval, unitP50)},
	{group: groupPeer, label: "asynq Enqueue", m: ns(peerAsynqEnqueue)},
	{group: groupPeer, label: "asynq, per job at c=20", m: metric(peerAsynqJobs20, unitJobs), perJob: true},
	{group: groupPeer, label: "BullMQ, per job at c=20", m: metric(peerBullMQJobs20, unitJobs), perJob: true},
}

func ptr[T any](v T) *T { return &v }
