package cache

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// latencies is a lock-free histogram of durations: 8 buckets per power of two of
// nanoseconds (each bucket about 9% wide), from 0 to about 137 s, and one for anything
// longer. Recording is one atomic add; quantiles are read from the counts, so they are
// exact to a bucket's width.
type latencies struct {
	counts [histBuckets]atomic.Int64
}

const (
	histSub     = 8 // buckets per power of two: 3 bits of mantissa
	histOctaves = 35
	histBuckets = histOctaves*histSub + 1
)

// bucketOf is the bucket of d: exact below 8 ns, then octave*8 + the 3 bits after the
// leading one.
func bucketOf(d time.Duration) int {
	ns := uint64(max(d, 0))
	if ns < histSub {
		return int(ns)
	}
	octave := bits.Len64(ns) - 1 // >= 3
	i := octave*histSub + int(ns>>(octave-3)&(histSub-1)) - 2*histSub
	return min(i, histBuckets-1)
}

// bucketTop is the largest duration bucket i holds (the last bucket has no top: MaxInt64).
func bucketTop(i int) time.Duration {
	if i < histSub {
		return time.Duration(i)
	}
	if i >= histBuckets-1 {
		return time.Duration(1<<63 - 1)
	}
	octave := (i + 2*histSub) / histSub
	sub := (i + 2*histSub) % histSub
	return time.Duration(uint64(histSub+sub+1)<<(octave-3) - 1)
}

func (h *latencies) record(d time.Duration) { h.counts[bucketOf(d)].Add(1) }

// addTo adds h's counts to sum.
func (h *latencies) addTo(sum *[histBuckets]int64) {
	for i := range h.counts {
		sum[i] += h.counts[i].Load()
	}
}

// HistogramBucket is one bucket of a latency histogram in [Stats]: Count durations at most
// UpTo, and longer than the UpTo of the bucket before it.
type HistogramBucket struct {
	UpTo  time.Duration
	Count int64
}

// histogramOf lists the non-empty buckets of counts, shortest first.
func histogramOf(counts *[histBuckets]int64) []HistogramBucket {
	var out []HistogramBucket
	for i, n := range counts {
		if n != 0 {
			out = append(out, HistogramBucket{UpTo: bucketTop(i), Count: n})
		}
	}
	return out
}

// quantile is the q-quantile (0 < q <= 1) of counts by nearest rank: the top of the bucket
// that holds the rank-th duration; 0 when nothing was recorded.
func quantile(counts *[histBuckets]int64, q float64) time.Duration {
	return histogramQuantile(histogramOf(counts), q)
}

// mergeHistograms adds b's buckets to a's: both list non-empty buckets shortest first, as
// [Stats] does, so the sum of two processes' histograms keeps the shape (and the quantiles
// read from it) of one histogram over both processes' delays.
func mergeHistograms(a, b []HistogramBucket) []HistogramBucket {
	if len(b) == 0 {
		return a
	}
	out := make([]HistogramBucket, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || i < len(a) && a[i].UpTo < b[j].UpTo:
			out = append(out, a[i])
			i++
		case i == len(a) || b[j].UpTo < a[i].UpTo:
			out = append(out, b[j])
			j++
		default:
			out = append(out, HistogramBucket{UpTo: a[i].UpTo, Count: a[i].Count + b[j].Count})
			i, j = i+1, j+1
		}
	}
	return out
}

// histogramQuantile is the q-quantile (0 < q <= 1) of a bucket list by nearest rank: the
// UpTo of the bucket that holds the rank-th duration; 0 when the list is empty.
func histogramQuantile(h []HistogramBucket, q float64) time.Duration {
	var total int64
	for _, b := range h {
		total += b.Count
	}
	if total == 0 {
		return 0
	}
	rank := min(max(int64(q*float64(total)+0.999999), 1), total)
	var seen int64
	for _, b := range h {
		if seen += b.Count; seen >= rank {
			return b.UpTo
		}
	}
	return h[len(h)-1].UpTo
}
