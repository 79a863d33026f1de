package main

import (
	"fmt"
	"strings"
)

// ref names one metric of one benchmark.
type ref struct {
	bench, unit string
}

// measure is a metric, or the round-by-round quotient of two ns/op metrics
// when den is set (a dimensionless factor such as the tier gap).
type measure struct {
	num ref
	den *ref
}

// unit is what the measure is expressed in: the metric's unit, or "×".
func (m measure) unit() string {
	if m.den != nil {
		return "×"
	}
	return m.num.unit
}

// benches lists the benchmarks the measure reads.
func (m measure) benches() []string {
	if m.den != nil {
		return []string{m.num.bench, m.den.bench}
	}
	return []string{m.num.bench}
}

type direction int

const (
	neither direction = iota // a factor to read, not to improve
	lower                    // a time: a smaller ratio is better
	higher                   // a throughput or a speed-up: larger is better
)

func (d direction) String() string {
	switch d {
	case lower:
		return "lower"
	case higher:
		return "higher"
	}
	return "neither"
}

type section string

const (
	secCache   section = "EchoCache read path and coherence (ours ÷ baseline or peer)"
	secBus     section = "EchoMQ bus (ours ÷ asynq or a raw round trip)"
	secContext section = "Baselines and peers on their own (no code of ours)"
)

// row is one line of the report.
type row struct {
	id      string // stable key in baseline.json
	section section
	name    string
	subject measure  // what the row is about
	other   *measure // what it is divided by; nil for a figure on its own
	seed    float64  // the seed's figure in subject's unit, 0 if none
	better  direction
	guard   bool   // bench-check fails when this ratio worsens
	target  string // the aim for the ratio, if it states one
	// paired names the ratio metric of a bench.Compare or
	// bench.CompareLatency benchmark measuring subject against other
	// interleaved; when it ran, the ratio is its, which survives the
	// machine's noise far better than dividing two separate benchmarks.
	paired *ref
	// seedOnRatio: the seed figure is a ratio, to set beside the ratio
	// column rather than the measured one.
	seedOnRatio bool
}

// side is one measured side of a row.
type side struct {
	ok     bool
	why    string // when !ok: why it is not measured
	sum    summary
	paired bool    // quotient measures: divided round by round
	allocs float64 // median allocs/op; -1 when not applicable or absent
	fails  int     // rounds that failed although others produced values
}

// rowResult is a row evaluated against the input.
type rowResult struct {
	row
	subj, oth side
	ratio     *summary // subj ÷ oth; nil when either side is missing
	paired    bool     // divided round by round, or interleaved
	// interleaved: the ratio is the paired Compare benchmark's.
	interleaved bool
	// pairedWhy: why a row with a paired benchmark fell back to dividing.
	pairedWhy string
	notes     []string
}

// spreadLimit is the spread above which a row says it is noisy.
const spreadLimit = 0.10

// eval computes one side.
func (r *results) eval(m measure) side {
	num, why := r.values(m.num)
	if why != "" {
		return side{why: why, allocs: -1}
	}
	s := side{ok: true, allocs: -1, fails: r.benches[m.num.bench].fails}
	if m.den == nil {
		s.sum = summarize(num)
		if a, ok := r.benches[m.num.bench].values["allocs/op"]; ok && len(a) > 0 {
			s.allocs = summarize(a).median
		}
		return s
	}
	den, why := r.values(*m.den)
	if why != "" {
		return side{why: why, allocs: -1}
	}
	s.fails += r.benches[m.den.bench].fails
	s.sum, s.paired = divide(num, den, s.fails == 0)
	return s
}

// values returns the samples of f, or why there are none.
func (r *results) values(f ref) ([]float64, string) {
	b := r.benches[f.bench]
	if b == nil {
		return nil, "not measured: " + f.bench + " absent"
	}
	if v := b.values[f.unit]; len(v) > 0 {
		return v, ""
	}
	switch {
	case b.fails > 0:
		return nil, "not measured: " + f.bench + " failed" + because(b.why)
	case b.skips > 0:
		return nil, "not measured: " + f.bench + " skipped" + because(b.why)
	case len(b.values) > 0:
		return nil, "not measured: " + f.bench + " reports no " + f.unit
	}
	return nil, "not measured: " + f.bench + " absent"
}

func because(why string) string {
	if why == "" {
		return ""
	}
	return " (" + why + ")"
}

// evalRows evaluates every row.
func (r *results) evalRows(rs []row) []rowResult {
	out := make([]rowResult, 0, len(rs))
	for _, rw := range rs {
		rr := rowResult{row: rw, subj: r.eval(rw.subject)}
		if rw.other != nil {
			rr.oth = r.eval(*rw.other)
		}
		if rw.paired != nil {
			vals, why := r.values(*rw.paired)
			if why == "" {
				q := summarize(vals)
				rr.ratio, rr.paired, rr.interleaved = &q, true, true
			} else {
				rr.pairedWhy = strings.TrimPrefix(why, "not measured: ")
			}
		}
		if rr.ratio == nil && rr.subj.ok && rw.other != nil && rr.oth.ok {
			num, okN := r.series(rw.subject)
			den, okD := r.series(*rw.other)
			pairable := okN && okD && rr.subj.fails+rr.oth.fails == 0
			q, paired := divide(num, den, pairable)
			rr.ratio, rr.paired = &q, paired
		}
		rr.notes = notes(rr)
		out = append(out, rr)
	}
	return out
}

// series is the per-round values of a measure: the metric's values, or for
// a quotient measure the round-by-round quotients. When a quotient's rounds
// do not pair it is the single median quotient and ok is false.
func (r *results) series(m measure) (vals []float64, ok bool) {
	num, why := r.values(m.num)
	if why != "" {
		return nil, false
	}
	if m.den == nil {
		return num, true
	}
	den, why := r.values(*m.den)
	if why != "" {
		return nil, false
	}
	pairable := r.benches[m.num.bench].fails+r.benches[m.den.bench].fails == 0
	if pairable && len(num) == len(den) {
		q := make([]float64, len(num))
		for i := range num {
			q[i] = num[i] / den[i]
		}
		return q, true
	}
	s, _ := divide(num, den, false)
	return []float64{s.median}, false
}

// notes are the warnings a row carries: noisy spread, unpaired rounds,
// failed rounds.
func notes(rr rowResult) []string {
	var n []string
	var noisy []string
	check := func(what string, s side) {
		if s.ok && s.sum.spread > spreadLimit {
			noisy = append(noisy, fmt.Sprintf("%s ±%s", what, pct(s.sum.spread)))
		}
	}
	check("measured", rr.subj)
	check("compared", rr.oth)
	if rr.ratio != nil && rr.ratio.spread > spreadLimit {
		noisy = append(noisy, "ratio ±"+pct(rr.ratio.spread))
	}
	if len(noisy) > 0 {
		n = append(n, "spread over 10%: "+strings.Join(noisy, ", "))
	}
	var dropped []string
	count := func(what string, s summary) {
		if s.outliers > 0 {
			dropped = append(dropped, fmt.Sprintf("%s %d", what, s.outliers))
		}
	}
	if rr.subj.ok {
		count("measured", rr.subj.sum)
	}
	if rr.oth.ok {
		count("compared", rr.oth.sum)
	}
	if rr.ratio != nil {
		count("ratio", *rr.ratio)
	}
	if len(dropped) > 0 {
		n = append(n, "outlier rounds dropped: "+strings.Join(dropped, ", "))
	}
	switch {
	case rr.interleaved:
		n = append(n, "ratio interleaved ("+rr.row.paired.bench+")")
	case rr.ratio != nil && rr.pairedWhy != "":
		n = append(n, "ratio of separate benchmarks: "+rr.pairedWhy)
	}
	if (rr.ratio != nil && !rr.paired) || (rr.subj.ok && rr.subject.den != nil && !rr.subj.paired) {
		n = append(n, "rounds unpaired: ratio of medians")
	}
	if f := rr.subj.fails + rr.oth.fails; f > 0 {
		n = append(n, fmt.Sprintf("%d failed round(s) left out", f))
	}
	return n
}

// pct formats a fraction as a percentage: 0.034 → "3.4%", 0.25 → "25%".
func pct(f float64) string {
	if f >= 0.1 {
		return fmt.Sprintf("%.0f%%", f*100)
	}
	return fmt.Sprintf("%.1f%%", f*100)
}
