package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSummaryCountsStaleReads feeds the demo's checker (summarize) reads whose staleness is
// known and asserts each stale one is counted, and nothing else: the demo's "stale reads 0"
// means something only if this checker can say otherwise. Product 1 has versions 1 and 2
// acknowledged in order; product 2 has version 3 acknowledged before version 2 (writes that
// finished out of order), so the version a read must reach is the highest acknowledged.
func TestSummaryCountsStaleReads(t *testing.T) {
	t.Parallel()
	const bound = time.Second
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	writes := []writeRec{
		{id: 1, version: 2, done: at(10 * time.Millisecond)}, // listed out of order on purpose
		{id: 1, version: 1, done: at(0)},
		{id: 2, version: 3, done: at(0)},
		{id: 2, version: 2, done: at(5 * time.Millisecond)},
	}
	reads := []readRec{
		// Stale: version 2 was acknowledged 2 s before the read began, beyond the 1 s bound.
		{id: 1, start: at(2 * time.Second), version: 1, tier: "l1"},
		// Fresh: the newest version.
		{id: 1, start: at(2 * time.Second), version: 2, tier: "l1"},
		// Within the bound: version 2 was acknowledged only 0.5 s before.
		{id: 1, start: at(510 * time.Millisecond), version: 1, tier: "l2"},
		// Stale: version 3 was acknowledged first, and it is the newest; 2 is below it.
		{id: 2, start: at(3 * time.Second), version: 2, tier: "l1"},
		// Fresh: the highest acknowledged version.
		{id: 2, start: at(3 * time.Second), version: 3, tier: "loader"},
		// A product never written: nothing to compare with.
		{id: 3, start: at(3 * time.Second), version: 0, tier: "loader"},
	}
	cfg := demoConfig{Bound: bound, Warmup: 0}
	s := summarize(cfg, reads, writes, t0, 4*time.Second)
	require.Equal(t, len(reads), s.allReads)
	require.Equal(t, 2, s.stale, "the two stale reads are counted, the fresh and in-bound ones are not: %v", s.staleExamples)
	require.Len(t, s.staleExamples, 2)
	require.Contains(t, s.staleExamples[0], "product 1: read version 1")
	require.Contains(t, s.staleExamples[0], "version 2 acknowledged")
	require.Contains(t, s.staleExamples[1], "product 2: read version 2")
	require.Contains(t, s.staleExamples[1], "version 3 acknowledged")

	// With no stale read the count is zero (the checker does not count every read).
	s = summarize(cfg, []readRec{reads[1], reads[2], reads[4], reads[5]}, writes, t0, 4*time.Second)
	require.Zero(t, s.stale, "%v", s.staleExamples)
}

// TestSummarySlowestRead: the summary names the read that took longest, warm-up included (a
// stall of one hot product shows there, when the percentiles of thousands of reads hide it).
func TestSummarySlowestRead(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	reads := []readRec{
		{id: 1, start: t0.Add(time.Second), latency: time.Millisecond, tier: "l1"},
		{id: 7, start: t0.Add(2 * time.Second), latency: 5500 * time.Millisecond, tier: "loader"},
		{id: 3, start: t0.Add(20 * time.Second), latency: 2 * time.Millisecond, tier: "l2"},
	}
	s := summarize(demoConfig{Bound: time.Second, Warmup: 10 * time.Second}, reads, nil, t0, 30*time.Second)
	require.Equal(t, int64(7), s.slowest.id)
	var out strings.Builder
	s.print(&out)
	require.Contains(t, out.String(), "slowest read  5.5s (product 7, tier loader, 2.0s into the run)")
}
