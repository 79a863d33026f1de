// Package bench holds EchoCache's benchmarks and the few helpers that the
// benchmarks of both modules share (the core module's bench/ and the nested
// module bench/peers), so that every figure in the report is measured the
// same way: the same row, the same percentile method, the same metric units.
//
// The benchmarks themselves are in _test.go files and run with `make bench`,
// which starts one throwaway valkey-server, points every benchmark binary at
// it with VALKEY_ADDR, runs the core and the peer benchmarks in interleaved
// rounds, and hands the output to cmd/benchreport. That tool prints one
// markdown table in which every figure of ours is a ratio to a baseline or a
// peer measured in the same run, because absolute numbers on a shared
// 2-core machine are noise while ratios within one run are not.
//
// A latency benchmark records each operation with a [Latencies] and reports
// its percentiles in the units [UnitP50] and [UnitP99]; a throughput
// benchmark reports [UnitJobsPerSec]:
//
//	var lat bench.Latencies
//	for b.Loop() {
//		start := time.Now()
//		publishAndWait()
//		lat.Add(time.Since(start))
//	}
//	lat.Report(b) // p50-ns and p99-ns beside ns/op
//
// A ratio that a target rests on is measured with [Compare], which runs the
// two operations in alternating blocks of about half a millisecond and
// reports the median per-block ratio: on a shared machine two benchmarks a
// second apart can differ threefold, two blocks a millisecond apart do not.
//
//	bench.Compare(b,
//		bench.Side{Name: "ours", Op: func(b *testing.B) { table.Get(ctx, id) }},
//		bench.Side{Name: "get", Op: func(b *testing.B) { rawGet(ctx, key) }})
//
// An end-to-end ratio cannot be cut into half-millisecond blocks (each side is a worker
// draining a queue), so BenchmarkCompareJobsLanes alternates whole drains of 5×b.N jobs, with
// and without lanes, in three pairs, and reports the median ratio of a pair in the same unit.
//
// Both sides of a comparison of our code with raw valkey-go run on one client: the client
// our cache or bus is built on. valkey-go serves a lone serial caller on the caller's own
// goroutine, until a connection is first used by two goroutines at once; from then on, for
// good, every command on it goes through the connection's writer and reader goroutines,
// which costs a few goroutine hand-offs per round trip (on this machine a raw GET in that
// mode takes about 1.2 times as long as one in the first). A cache or a bus always reaches
// that mode (its subscriber, reconcile and stats run beside the reads), so a raw baseline on
// a fresh client would measure the other mode of the connection rather than our code.
//
// The seed's published figures ([SeedL1HitNs], [SeedL2GetNs],
// [SeedL1L2Ratio]) are constants here so that the report and the benchmarks
// quote them from one place.
package bench
