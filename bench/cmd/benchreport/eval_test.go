package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// lines renders benchmark result lines, one per value: the rounds of a run.
func lines(name string, unit string, vals ...float64) string {
	var b strings.Builder
	for _, v := range vals {
		fmt.Fprintf(&b, "%s-2 \t 1000 \t %g %s \t 0 B/op \t 0 allocs/op\n", name, v, unit)
	}
	return b.String()
}

func TestEvalRows(t *testing.T) {
	t.Parallel()
	in := lines("BenchmarkOurs", "ns/op", 150, 150, 165, 150, 150) +
		lines("BenchmarkBase", "ns/op", 100, 100, 110, 100, 100) +
		lines("BenchmarkNoisy", "ns/op", 80, 90, 100, 110, 120) +
		lines("BenchmarkEdge", "ns/op", 90, 95, 100, 105, 110) +
		lines("BenchmarkFast", "jobs/s", 3000, 3000, 3000, 3000, 3000) +
		"--- FAIL: BenchmarkDead-2\n    x_test.go:1: boom\n" +
		"--- SKIP: BenchmarkSkip-2\n    x_test.go:2: no cluster\n" +
		lines("BenchmarkPartial", "ns/op", 100, 100, 100, 100) + "--- FAIL: BenchmarkPartial-2\n    x_test.go:3: flake\n"
	r := parseString(t, in)

	cases := []struct {
		name      string
		row       row
		subj      string // formatted subject cell
		ratio     string // formatted ratio cell
		noteHas   string
		noteEmpty bool
	}{
		{
			name: "paired ratio cancels a slow round, which each side drops",
			row:  row{subject: ns("BenchmarkOurs"), other: ptr(ns("BenchmarkBase"))},
			subj: "150 ns ±0.0%", ratio: "1.50× ±0.0%", noteHas: "outlier rounds dropped: measured 1, compared 1",
		},
		{
			name: "spread of exactly 10% is not flagged",
			row:  row{subject: ns("BenchmarkEdge")},
			subj: "100 ns ±10%", ratio: "—", noteEmpty: true,
		},
		{
			name: "spread over 10% says so",
			row:  row{subject: ns("BenchmarkNoisy"), other: ptr(ns("BenchmarkBase"))},
			subj: "100 ns ±20%", ratio: "0.909× ±32%", noteHas: "spread over 10%: measured ±20%, ratio ±32%",
		},
		{
			name: "absent benchmark is not measured, never estimated",
			row:  row{subject: ns("BenchmarkCacheL1Hit/serial"), other: ptr(ns("BenchmarkBase"))},
			subj: "*not measured: BenchmarkCacheL1Hit/serial absent*", ratio: "—", noteHas: "outlier rounds dropped: compared 1",
		},
		{
			name: "failed benchmark says why",
			row:  row{subject: ns("BenchmarkDead"), other: ptr(ns("BenchmarkBase"))},
			subj: "*not measured: BenchmarkDead failed (x_test.go:1: boom)*", ratio: "—",
		},
		{
			name: "skipped benchmark says why",
			row:  row{subject: ns("BenchmarkSkip")},
			subj: "*not measured: BenchmarkSkip skipped (x_test.go:2: no cluster)*", ratio: "—",
		},
		{
			name: "missing metric",
			row:  row{subject: metric("BenchmarkBase", unitP99)},
			subj: "*not measured: BenchmarkBase reports no p99-ns*", ratio: "—",
		},
		{
			name: "a failed round unpairs the ratio and is counted",
			row:  row{subject: ns("BenchmarkPartial"), other: ptr(ns("BenchmarkBase"))},
			subj: "100 ns ±0.0%", ratio: "1.00× ±0.0%", noteHas: "1 failed round(s) left out",
		},
		{
			name: "quotient measure divides round by round",
			row:  row{subject: quot("BenchmarkOurs", "BenchmarkBase")},
			subj: "1.50× ±0.0%", ratio: "—", noteEmpty: true,
		},
		{
			name: "throughput",
			row:  row{subject: metric("BenchmarkFast", unitJobs)},
			subj: "3,000 jobs/s ±0.0%", ratio: "—", noteEmpty: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rr := r.evalRows([]row{tc.row})[0]
			require.Equal(t, tc.subj, sideCell(rr.subj, rr.subject))
			require.Equal(t, tc.ratio, ratioCell(rr))
			note := strings.Join(rr.notes, "; ")
			if tc.noteEmpty {
				require.Empty(t, note)
			}
			require.Contains(t, note, tc.noteHas)
		})
	}
}

func TestSeedAndAllocsCells(t *testing.T) {
	t.Parallel()
	r := parseString(t, lines("BenchmarkL1", "ns/op", 381, 381, 381)+lines("BenchmarkBase", "ns/op", 100, 100, 100))
	rr := r.evalRows([]row{{subject: ns("BenchmarkL1"), other: ptr(ns("BenchmarkBase")), seed: 762}})[0]
	require.Equal(t, "762 ns (0.500×)", seedCell(rr))
	require.Equal(t, "0 / 0", allocsCell(rr))

	missing := r.evalRows([]row{{subject: ns("BenchmarkGone"), other: ptr(ns("BenchmarkBase")), seed: 762}})[0]
	require.Equal(t, "762 ns", seedCell(missing), "no ratio to the seed without a measurement")
	require.Equal(t, "– / 0", allocsCell(missing))
}

func TestTableMarksNotMeasuredAndEscapes(t *testing.T) {
	t.Parallel()
	r := parseString(t, lines("BenchmarkBase", "ns/op", 100, 100, 100))
	rrs := r.evalRows([]row{
		{section: secCache, name: "a | b", subject: ns("BenchmarkCacheL1Hit/serial"), other: ptr(ns("BenchmarkBase"))},
		{section: secContext, name: "base", subject: ns("BenchmarkBase")},
	})
	var b strings.Builder
	writeTable(&b, rrs)
	out := b.String()
	require.Contains(t, out, `| a \| b | *not measured: BenchmarkCacheL1Hit/serial absent* | 100 ns ±0.0% | — |`)
	require.Contains(t, out, "| **"+string(secCache)+"** |")
	require.Contains(t, out, "| **"+string(secContext)+"** |")
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		require.Equal(t, 9, strings.Count(l, "|")-strings.Count(l, `\|`), "every line has 8 cells: %s", l)
	}
}

func TestInterleavedRatio(t *testing.T) {
	t.Parallel()
	// Separate benchmarks disagree wildly round by round; the interleaved
	// one says 2×, and its ratio is the one reported.
	in := lines("BenchmarkGet", "ns/op", 40000, 150000, 45000, 160000, 50000) +
		lines("BenchmarkRistretto", "ns/op", 100, 100, 100, 100, 100) +
		lines("BenchmarkCompareGap", "ratio", 400, 410, 390, 395, 405)
	r := parseString(t, in)
	rs := []row{
		{subject: ns("BenchmarkGet"), other: ptr(ns("BenchmarkRistretto")), paired: cmp("BenchmarkCompareGap"), seed: 40, seedOnRatio: true},
		{subject: ns("BenchmarkGet"), other: ptr(ns("BenchmarkRistretto")), paired: cmp("BenchmarkCompareMissing")},
	}
	rrs := r.evalRows(rs)

	got := rrs[0]
	require.True(t, got.interleaved)
	require.Equal(t, "400× ±2.5%", ratioCell(got))
	require.Equal(t, "50.0 µs ±220%", sideCell(got.subj, got.subject), "the sides stay the standalone figures")
	require.Contains(t, strings.Join(got.notes, "; "), "ratio interleaved (BenchmarkCompareGap)")
	require.Equal(t, "40.0× (10.0×)", seedCell(got), "the seed's ratio sits beside our ratio")

	fallback := rrs[1]
	require.False(t, fallback.interleaved)
	require.Equal(t, "500× ±220%", ratioCell(fallback))
	require.Contains(t, strings.Join(fallback.notes, "; "), "ratio of separate benchmarks: BenchmarkCompareMissing absent")
}
