// Package valkeytest runs real valkey-server processes for tests: a shared
// server per test process, dedicated servers for fault tests, and
// 3-primary/3-replica clusters, all on loopback ports.
//
// A test package that uses it declares
//
//	func TestMain(m *testing.M) { valkeytest.Main(m) }
//
// so that every server the process started is stopped when the tests end or
// when the process gets SIGINT/SIGTERM. Each child also gets PR_SET_PDEATHSIG
// (SIGKILL) and its own process group, so no valkey-server outlives the test
// binary even when it is killed hard.
//
// Use [Shared] (or [SharedCluster]) for ordinary tests: they are cheap, but
// other tests use the same server concurrently, so every test must use its
// own key names and must never FLUSHALL/FLUSHDB. Use [Start] (or
// [StartCluster]) when a test kills, stops, restarts or fails over the
// server; fault methods refuse to act on the shared instances.
//
// When the environment variable VALKEY_ADDR is set, [Shared] returns a Server
// for that address instead of starting one; its fault methods return an
// error.
//
// valkey-server and valkey-cli must be on PATH: run .ci/install-valkey (or
// make test, which runs it).
package valkeytest
