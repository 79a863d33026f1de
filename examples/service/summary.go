package main

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"time"
)

// summary is what the demo prints at the end, computed from what the load driver saw.
type summary struct {
	elapsed       time.Duration
	reads, writes int // reads counts those after the warm-up
	allReads      int
	tiers         map[string][]time.Duration // latency per tier: l1, l2, loader
	stale         int                        // reads older than a version committed Bound before they began
	staleExamples []string
	errors        int64
	jobsEnqueued  int64
	jobsDone      int64
	jobsDuplicate int64
	jobsReclaimed int64 // finished under a later claim: an earlier holder died or lost its lease
	killed        bool
	stats         []*instanceStats
	bound         time.Duration
	warmup        time.Duration
	l1All         float64 // L1 share over the whole run, warm-up included
	slowest       readRec // the read that took longest, warm-up included: a stall shows here
	start         time.Time
}

// summarize checks every read against the versions the driver saw committed: a read that
// began more than cfg.Bound after version v of its product was acknowledged, and returned a
// version below v, is stale beyond the bound.
//
// Tier shares and latencies count only the reads after the warm-up (caches start cold); the
// staleness check covers every read.
func summarize(cfg demoConfig, reads []readRec, writes []writeRec, start time.Time, elapsed time.Duration) *summary {
	s := &summary{elapsed: elapsed, writes: len(writes), tiers: map[string][]time.Duration{}, bound: cfg.Bound, warmup: cfg.Warmup, start: start}
	s.allReads = len(reads)
	warm := start.Add(cfg.Warmup)
	var l1All int
	// Per product, the acknowledged versions in order of acknowledgement, with the running
	// maximum version, so "newest version acknowledged by time t" is one binary search.
	type ack struct {
		at  time.Time
		max int64
	}
	acks := map[int64][]ack{}
	sort.Slice(writes, func(i, j int) bool { return writes[i].done.Before(writes[j].done) })
	for _, w := range writes {
		list := acks[w.id]
		m := w.version
		if n := len(list); n > 0 && list[n-1].max > m {
			m = list[n-1].max
		}
		acks[w.id] = append(list, ack{at: w.done, max: m})
	}
	for _, r := range reads {
		if r.tier == "l1" {
			l1All++
		}
		if r.latency > s.slowest.latency {
			s.slowest = r
		}
		if !r.start.Before(warm) {
			s.reads++
			s.tiers[r.tier] = append(s.tiers[r.tier], r.latency)
		}
		list := acks[r.id]
		cut := r.start.Add(-cfg.Bound)
		i := sort.Search(len(list), func(i int) bool { return list[i].at.After(cut) })
		if i == 0 {
			continue // no version was acknowledged long enough before this read
		}
		if want := list[i-1].max; r.version < want {
			s.stale++
			if len(s.staleExamples) < 5 {
				s.staleExamples = append(s.staleExamples, fmt.Sprintf("product %d: read version %d (tier %s) at %s, version %d acknowledged before %s",
					r.id, r.version, r.tier, r.start.Format("15:04:05.000"), want, cut.Format("15:04:05.000")))
			}
		}
	}
	if len(reads) > 0 {
		s.l1All = 100 * float64(l1All) / float64(len(reads))
	}
	return s
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[min(len(d)-1, int(p*float64(len(d))))]
}

func (s *summary) print(w io.Writer) {
	total := s.allReads + s.writes
	fmt.Fprintf(w, "\n== summary ==\n")
	fmt.Fprintf(w, "requests      %d in %s: %.0f req/s (%d reads after the warm-up, %d writes, %d errors)\n",
		total, s.elapsed.Round(time.Millisecond), float64(total)/s.elapsed.Seconds(), s.reads, s.writes, s.errors)
	fmt.Fprintf(w, "reads by tier after the %s warm-up (L1 share over the whole run, cold start included: %.2f%%)\n", s.warmup, s.l1All)
	fmt.Fprintf(w, "%-8s %9s %8s %10s %10s\n", "tier", "reads", "share", "p50", "p99")
	for _, tier := range []string{"l1", "l2", "loader"} {
		d := s.tiers[tier]
		share := 0.0
		if s.reads > 0 {
			share = 100 * float64(len(d)) / float64(s.reads)
		}
		fmt.Fprintf(w, "%-8s %9d %7.2f%% %10s %10s\n", tier, len(d), share, percentile(d, 0.50).Round(time.Microsecond), percentile(d, 0.99).Round(time.Microsecond))
	}
	if r := s.slowest; r.latency > 0 {
		fmt.Fprintf(w, "slowest read  %s (product %d, tier %s, %.1fs into the run)\n",
			r.latency.Round(time.Microsecond), r.id, r.tier, r.start.Sub(s.start).Seconds())
	}
	for _, st := range s.stats {
		if st == nil {
			continue
		}
		fmt.Fprintf(w, "instance %s    invalidations sent %d, received %d; propagation mean %s, max %s; table flushes %d; jobs run %d\n",
			st.Name, st.InvalidationsSent, st.InvalidationsReceived, time.Duration(st.PropagationMeanNanos).Round(time.Microsecond),
			time.Duration(st.PropagationMaxNanos).Round(time.Microsecond), st.Flushes, st.JobsRun)
	}
	if s.killed {
		fmt.Fprintf(w, "instance B was killed mid-run; %d jobs were finished on a later claim after their holder died or lost its lease\n", s.jobsReclaimed)
	}
	fmt.Fprintf(w, "jobs          %d enqueued by acknowledged writes, %d done, %d ran more than once\n", s.jobsEnqueued, s.jobsDone, s.jobsDuplicate)
	fmt.Fprintf(w, "stale reads   %d beyond the %s bound\n", s.stale, s.bound)
	for _, e := range s.staleExamples {
		fmt.Fprintf(w, "  %s\n", e)
	}
}
