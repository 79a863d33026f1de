package bench

import (
	"slices"
	"testing"
	"time"
)

// Side is one side of a [Compare]: a name, which becomes the prefix of its
// metric's unit (so [A-Za-z0-9_.-]), and one operation.
type Side struct {
	Name string
	Op   func(b *testing.B)
}

// UnitRatio is the unit of [Compare]'s ratio metric.
const UnitRatio = "ratio"

// compareBlockTarget is how long one block of one side should take: short
// enough that the two blocks of a pair see the same machine (the load of a
// shared machine moves on a scale of tens of milliseconds and more), long
// enough that reading the clock is negligible.
const compareBlockTarget = 500 * time.Microsecond

// maxBlockOps bounds a block of a very fast operation.
const maxBlockOps = 5000

// Compare measures two operations in alternating short blocks (a block of a
// then one of base, then base first in the next pair, and so on) until each
// has run b.N times. It reports "<a.Name>-ns/op" and "<base.Name>-ns/op",
// and in [UnitRatio] the median over the block pairs of a's time divided by
// base's: two figures taken a millisecond apart on the same machine state.
// That is how a ratio survives a noisy shared machine, where two separate
// benchmarks a second apart do not (BenchmarkCompareGetAA, raw GET against
// itself, shows the floor). The built-in ns/op, both sides together, is
// suppressed so that it is not mistaken for either. Allocation figures, if
// the benchmark reports them, count both sides together; each side's own come
// from its standalone benchmark.
func Compare(b *testing.B, a, base Side) {
	b.Helper()
	// Each side's block is sized on its own, so that each takes about compareBlockTarget: a
	// fast side given the slow side's count (a few ristretto Gets after each raw GET) would
	// run cold after every wait and measure that, 3 to 10 times its own speed.
	na, nb := blockSize(b, a), blockSize(b, base)
	var totA, totB time.Duration
	var opsB int
	var ratios []float64
	b.ResetTimer()
	for pair, done := 0, 0; done < b.N; pair++ {
		n := min(na, b.N-done)
		var ta, tb time.Duration
		if pair%2 == 0 {
			ta = timeOps(b, a, n)
			tb = timeOps(b, base, nb)
		} else {
			tb = timeOps(b, base, nb)
			ta = timeOps(b, a, n)
		}
		totA += ta
		totB += tb
		opsB += nb
		if tb > 0 {
			ratios = append(ratios, (float64(ta)/float64(n))/(float64(tb)/float64(nb)))
		}
		done += n
	}
	b.StopTimer()
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(totA.Nanoseconds())/float64(b.N), a.Name+"-ns/op")
	b.ReportMetric(float64(totB.Nanoseconds())/float64(opsB), base.Name+"-ns/op")
	if len(ratios) > 0 {
		slices.Sort(ratios)
		b.ReportMetric(ratios[len(ratios)/2], UnitRatio)
	}
}

// timeOps runs n operations of s and returns how long they took.
func timeOps(b *testing.B, s Side, n int) time.Duration {
	start := time.Now()
	for range n {
		s.Op(b)
	}
	return time.Since(start)
}

// blockSize picks how many operations of s one block runs: enough to take about
// compareBlockTarget; at least 1, at most maxBlockOps.
func blockSize(b *testing.B, s Side) int {
	const probe = 5
	per := timeOps(b, s, probe) / probe
	if per <= 0 {
		return maxBlockOps
	}
	return int(min(max(compareBlockTarget/per, 1), maxBlockOps))
}

// LatencySide is one side of a [CompareLatency]: an operation that returns
// the duration of the span it measures, so that it can leave out its own
// setup (re-arming a cache entry, say).
type LatencySide struct {
	Name string
	Op   func(b *testing.B) time.Duration
}

// Units of [CompareLatency]'s ratio metrics.
const (
	UnitP50Ratio = "p50-ratio"
	UnitP99Ratio = "p99-ratio"
)

// CompareLatency is [Compare] for latency distributions: each of the b.N
// iterations runs one operation of each side, alternating which goes first,
// and it reports each side's percentiles ("<name>-p50-ns", "<name>-p99-ns")
// and a's percentile divided by base's ([UnitP50Ratio], [UnitP99Ratio]).
// Both distributions sample the same moments of the machine, so their ratio
// holds where two separate benchmarks' percentiles do not.
func CompareLatency(b *testing.B, a, base LatencySide) {
	b.Helper()
	var la, lb Latencies
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			la.Add(a.Op(b))
			lb.Add(base.Op(b))
		} else {
			lb.Add(base.Op(b))
			la.Add(a.Op(b))
		}
	}
	b.StopTimer()
	b.ReportMetric(0, "ns/op")
	pa50, pa99 := la.Percentile(50), la.Percentile(99)
	pb50, pb99 := lb.Percentile(50), lb.Percentile(99)
	b.ReportMetric(float64(pa50.Nanoseconds()), a.Name+"-"+UnitP50)
	b.ReportMetric(float64(pa99.Nanoseconds()), a.Name+"-"+UnitP99)
	b.ReportMetric(float64(pb50.Nanoseconds()), base.Name+"-"+UnitP50)
	b.ReportMetric(float64(pb99.Nanoseconds()), base.Name+"-"+UnitP99)
	if pb50 > 0 && pb99 > 0 {
		b.ReportMetric(float64(pa50)/float64(pb50), UnitP50Ratio)
		b.ReportMetric(float64(pa99)/float64(pb99), UnitP99Ratio)
	}
}
