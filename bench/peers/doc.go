// Package peers measures the libraries that users would otherwise pick
// instead of EchoCache, on the same throwaway valkey-server and in the same
// run as the core benchmarks (`make bench` points both at one server with
// VALKEY_ADDR): valkey-go client-side caching, go-redis/cache v9 and
// hibiken/asynq.
//
// It is a module of its own so that these dependencies never reach the core
// go.mod; it replaces github.com/echocache/echocache with ../.., so it can
// also bench our packages beside the peers and reuse the core's test harness
// and shared benchmark helpers.
//
// Every benchmark reads or enqueues what the core benchmarks do
// ([bench.SampleRow], a table row key from the keys package, p50-ns/p99-ns
// from [bench.Latencies]), so the report can divide one by the other.
package peers
