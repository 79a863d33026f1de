package main

import (
	"math"
	"slices"
)

// summary is benchstat's summary of a set of runs (the method of the
// original benchstat, with the median in place of the mean): rounds outside
// Tukey's fences (more than 1.5 × IQR beyond the quartiles) are dropped as
// outliers, and of the rest we report the median, which one slow round
// cannot drag, and the spread, the largest deviation of any kept round from
// the median as a fraction of the median: every kept round lies within
// median × (1 ± spread). With fewer than 4 rounds nothing is dropped.
type summary struct {
	n              int // rounds kept
	outliers       int // rounds dropped
	median, spread float64
	min, max       float64 // of the kept rounds
}

// minForOutliers is the fewest rounds whose quartiles mean anything.
const minForOutliers = 4

// summarize summarizes xs; it needs at least one value.
func summarize(xs []float64) summary {
	s := slices.Clone(xs)
	slices.Sort(s)
	kept := s
	if len(s) >= minForOutliers {
		q1, q3 := quantile(s, 0.25), quantile(s, 0.75)
		lo, hi := q1-1.5*(q3-q1), q3+1.5*(q3-q1)
		kept = kept[:0:0]
		for _, v := range s {
			if v >= lo && v <= hi {
				kept = append(kept, v)
			}
		}
	}
	n := len(kept)
	med := quantile(kept, 0.5)
	dev := math.Max(med-kept[0], kept[n-1]-med)
	spread := 0.0
	if med != 0 {
		spread = dev / math.Abs(med)
	} else if dev != 0 {
		spread = math.Inf(1)
	}
	return summary{n: n, outliers: len(s) - n, median: med, spread: spread, min: kept[0], max: kept[n-1]}
}

// quantile is the q-quantile of sorted s by linear interpolation between
// the closest ranks (the R-7 / numpy default); q = 0.5 is the median.
func quantile(s []float64, q float64) float64 {
	pos := q * float64(len(s)-1)
	i := int(math.Floor(pos))
	if i >= len(s)-1 {
		return s[len(s)-1]
	}
	return s[i] + (pos-float64(i))*(s[i+1]-s[i])
}

// divide returns a/b. When both have one value per round (the same count,
// and pairable: no round of either failed, which would shift the indices),
// it divides round by round, so drift between rounds cancels and the
// spread of the quotient is measured; paired is then true. Otherwise it
// divides the medians, and the quotient's spread is bounded by the sum of
// the two spreads.
func divide(a, b []float64, pairable bool) (q summary, paired bool) {
	if pairable && len(a) == len(b) {
		qs := make([]float64, len(a))
		for i := range a {
			qs[i] = a[i] / b[i]
		}
		return summarize(qs), true
	}
	sa, sb := summarize(a), summarize(b)
	m := sa.median / sb.median
	return summary{n: min(sa.n, sb.n), median: m, spread: sa.spread + sb.spread,
		min: m * (1 - sa.spread - sb.spread), max: m * (1 + sa.spread + sb.spread)}, false
}
