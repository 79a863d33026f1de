package bench

import (
	"slices"
	"testing"
	"time"
)

// Latencies collects the duration of each operation of a benchmark so that
// it can report percentiles, which ns/op (a mean) hides. The zero value is
// ready to use. It is not safe for concurrent use: a parallel benchmark keeps
// one per goroutine and merges them with [Latencies.Merge].
type Latencies struct {
	d []time.Duration
}

// Add records one operation's duration.
func (l *Latencies) Add(d time.Duration) { l.d = append(l.d, d) }

// Merge adds every duration recorded in o.
func (l *Latencies) Merge(o *Latencies) { l.d = append(l.d, o.d...) }

// Len is the number of durations recorded.
func (l *Latencies) Len() int { return len(l.d) }

// Percentile returns the p-th percentile (0 < p <= 100) by the
// nearest-rank method, or 0 when nothing was recorded. Nearest rank always
// answers a duration that was actually observed.
func (l *Latencies) Percentile(p float64) time.Duration {
	if len(l.d) == 0 {
		return 0
	}
	s := slices.Clone(l.d)
	slices.Sort(s)
	return s[nearestRank(len(s), p)]
}

// nearestRank is the index of the p-th percentile in a sorted slice of n
// elements: ceil(p/100*n) - 1, clamped to [0, n-1].
func nearestRank(n int, p float64) int {
	r := int(p / 100 * float64(n))
	if float64(r) < p/100*float64(n) {
		r++
	}
	return min(max(r-1, 0), n-1)
}

// Report reports the 50th and 99th percentiles in [UnitP50] and [UnitP99].
// It does nothing when nothing was recorded, so a benchmark that failed
// before measuring reports no invented figure.
func (l *Latencies) Report(b *testing.B) {
	b.Helper()
	if len(l.d) == 0 {
		return
	}
	b.ReportMetric(float64(l.Percentile(50).Nanoseconds()), UnitP50)
	b.ReportMetric(float64(l.Percentile(99).Nanoseconds()), UnitP99)
}

// Reset forgets every duration recorded, keeping the storage.
func (l *Latencies) Reset() { l.d = l.d[:0] }
