package main

import (
	"math"
	"slices"
)

// summary is benchstat's summary of a set of runs: the median, which one
// slow round cannot drag, and the spread, the largest deviation of any run
// from the median as a fraction of the median. The spread is the honest
// bound: every run lies within median × (1 ± spread).
type summary struct {
	n              int
	median, spread float64
	min, max       float64
}

// summarize summarizes xs; it needs at least one value.
func summarize(xs []float64) summary {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	var med float64
	if n%2 == 1 {
		med = s[n/2]
	} else {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	dev := math.Max(med-s[0], s[n-1]-med)
	spread := 0.0
	if med != 0 {
		spread = dev / math.Abs(med)
	} else if dev != 0 {
		spread = math.Inf(1)
	}
	return summary{n: n, median: med, spread: spread, min: s[0], max: s[n-1]}
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
