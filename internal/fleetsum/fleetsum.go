// Package fleetsum keeps the counters an exporter reports for a fleet (a queue's workers, a
// table's caches) from going down when a member leaves or restarts.
//
// Each member publishes its counters since it started ([bus.Bus.WorkerStats],
// [cache.ReadStats]); their sum over the live members drops when a member stops, and a
// metrics backend reads any drop of a counter as a reset: Prometheus's rate() then counts the
// survivors' whole totals as new growth (a spike at every deploy), and a delta exporter
// reports a negative delta. A [Sums] remembers each member: one that left keeps contributing
// the last counters it reported, and one whose counters went down (a restart under the same
// key) keeps its previous life's. So the totals only grow while the Sums lives; an exporter
// process that starts again starts from the live members, which a backend takes for one
// reset. A sampled read (FleetStats.Partial) is summed the same way: the members a read
// leaves out count with their last counters.
package fleetsum

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/cache"
)

// ForgetAfter is how long a member that left is remembered on its own, in case it comes back
// (a report that expired while its process was stalled); past it, its last counters join the
// fleet's sum of the members gone, and a tombstone of them is kept for TombstoneFor, so memory
// stays bounded by the members of the last hour and the tombstones of the last day. A member
// that comes back later still (a process cut off from Valkey for hours) is
// recognised for TombstoneFor more: its counters leave the sum of the gone as it rejoins, so
// they are not counted twice.
const ForgetAfter = time.Hour

// TombstoneFor is how long the last counters of a forgotten member are kept, beside the sum
// of the gone, in case it reports again under its key.
const TombstoneFor = 24 * time.Hour

// Sums is the memory of the fleets one exporter reports. The zero value is ready; it is safe
// for concurrent use.
type Sums struct {
	mu     sync.Mutex
	fleets map[string]*fleet
}

// fleet is what Sums remembers of one queue's workers or one table's caches.
type fleet struct {
	members map[string]*member // by member key; ended lives are kept under keys of their own
	gone    counters           // the members forgotten after ForgetAfter, summed
	tombs   map[string]*member // the forgotten members, by key, their goneAt when forgotten
	lives   int                // numbers the keys of ended lives
}

type member struct {
	last   counters
	goneAt time.Time // zero while the member reports
}

// counters are one member's counters by name.
type counters map[string]float64

// Queue returns fs.Total with its counters (Running aside, a gauge) summed over the queue's
// workers, live and gone. A worker restarted under the same ID has another Started: it is
// another member.
func (s *Sums) Queue(fs bus.FleetStats) bus.WorkerStats {
	cur := make(map[string]counters, len(fs.Workers))
	for _, r := range fs.Workers {
		w := r.Stats
		cur[r.ID+"\x00"+r.Started.UTC().Format(time.RFC3339Nano)] = counters{
			"claimed": float64(w.Claimed), "completed": float64(w.Completed), "failed": float64(w.Failed),
			"retried": float64(w.Retried), "dead": float64(w.Dead), "snoozed": float64(w.Snoozed),
			"handed_back": float64(w.HandedBack), "stale": float64(w.Stale), "lease_lost": float64(w.LeaseLost),
			"cancelled": float64(w.Cancelled), "rate_limited": float64(w.RateLimited),
		}
	}
	sum := s.total("queue\x00"+fs.Queue, cur, fs.At)
	t := fs.Total
	t.Claimed, t.Completed, t.Failed = int64(sum["claimed"]), int64(sum["completed"]), int64(sum["failed"])
	t.Retried, t.Dead, t.Snoozed = int64(sum["retried"]), int64(sum["dead"]), int64(sum["snoozed"])
	t.HandedBack, t.Stale, t.LeaseLost = int64(sum["handed_back"]), int64(sum["stale"]), int64(sum["lease_lost"])
	t.Cancelled, t.RateLimited = int64(sum["cancelled"]), int64(sum["rate_limited"])
	return t
}

// Table returns fs.Total with the counters an exporter reads summed over the table's caches,
// live and gone: the hits, misses and loads, the invalidations, gaps, regressions and
// flushes, and the propagation count, total and histogram. The other fields are fs.Total's.
func (s *Sums) Table(fs cache.FleetStats) cache.Stats {
	cur := make(map[string]counters, len(fs.Caches))
	for _, r := range fs.Caches {
		st := r.Stats
		c := counters{
			"l1": float64(st.L1Hits), "l2": float64(st.L2Hits), "misses": float64(st.Misses),
			"loads": float64(st.Loads), "load_errors": float64(st.LoadErrors), "load_ns": float64(st.LoadTime),
			"sent": float64(st.InvalidationsSent), "received": float64(st.InvalidationsReceived),
			"gaps": float64(st.Gaps), "regressions": float64(st.Regressions), "flushes": float64(st.Flushes),
			"prop_n": float64(st.PropagationCount), "prop_ns": float64(st.PropagationTotal),
		}
		for _, b := range st.PropagationHistogram {
			c[histKey+strconv.FormatInt(int64(b.UpTo), 10)] = float64(b.Count)
		}
		cur[r.ID] = c
	}
	sum := s.total("table\x00"+fs.Table, cur, fs.At)
	t := fs.Total
	t.L1Hits, t.L2Hits, t.Misses = int64(sum["l1"]), int64(sum["l2"]), int64(sum["misses"])
	t.Loads, t.LoadErrors, t.LoadTime = int64(sum["loads"]), int64(sum["load_errors"]), time.Duration(sum["load_ns"])
	t.InvalidationsSent, t.InvalidationsReceived = int64(sum["sent"]), int64(sum["received"])
	t.Gaps, t.Regressions, t.Flushes = int64(sum["gaps"]), int64(sum["regressions"]), int64(sum["flushes"])
	t.PropagationCount, t.PropagationTotal = int64(sum["prop_n"]), time.Duration(sum["prop_ns"])
	t.PropagationHistogram = histogram(sum)
	return t
}

// histKey prefixes a propagation bucket's counter: its top, in ns.
const histKey = "hist:"

// histogram lists sum's propagation buckets, shortest first.
func histogram(sum counters) []cache.HistogramBucket {
	var out []cache.HistogramBucket
	for k, v := range sum {
		if top, ok := strings.CutPrefix(k, histKey); ok && v > 0 {
			if ns, err := strconv.ParseInt(top, 10, 64); err == nil {
				out = append(out, cache.HistogramBucket{UpTo: time.Duration(ns), Count: int64(v)})
			}
		}
	}
	slices.SortFunc(out, func(a, b cache.HistogramBucket) int { return cmp.Compare(a.UpTo, b.UpTo) })
	return out
}

// total returns the fleet's counters: what the live members report now (cur, by member key)
// plus the last counters of the members that left, at now (the read's server time).
func (s *Sums) total(name string, cur map[string]counters, now time.Time) counters {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fleets == nil {
		s.fleets = map[string]*fleet{}
	}
	f := s.fleets[name]
	if f == nil {
		f = &fleet{members: map[string]*member{}, gone: counters{}, tombs: map[string]*member{}}
		s.fleets[name] = f
	}
	for key, c := range cur {
		if t := f.tombs[key]; t != nil {
			// A forgotten member reports again: its counters leave the sum of the gone, and
			// it is a member again (a restart meanwhile, counters lower, is another life).
			delete(f.tombs, key)
			if !below(c, t.last) {
				for k, v := range t.last {
					f.gone[k] -= v
				}
			}
		}
		if p := f.members[key]; p != nil && below(c, p.last) {
			// The counters went down: the member restarted under the same key. Its previous
			// life stays counted, as a member that left.
			f.lives++
			f.members[key+"\x00"+strconv.Itoa(f.lives)] = &member{last: p.last, goneAt: now}
		}
		f.members[key] = &member{last: c}
	}
	sum := counters{}
	for k, v := range f.gone {
		sum[k] += v
	}
	for key, p := range f.members {
		if _, live := cur[key]; !live && p.goneAt.IsZero() {
			p.goneAt = now
		}
		for k, v := range p.last {
			sum[k] += v
		}
		if !p.goneAt.IsZero() && now.Sub(p.goneAt) > ForgetAfter {
			for k, v := range p.last {
				f.gone[k] += v
			}
			delete(f.members, key)
			f.tombs[key] = &member{last: p.last, goneAt: now}
		}
	}
	for key, t := range f.tombs {
		if now.Sub(t.goneAt) > TombstoneFor {
			delete(f.tombs, key)
		}
	}
	return sum
}

// below reports whether a counter of c is lower than in prev (one c lacks counts as 0).
func below(c, prev counters) bool {
	for k, v := range prev {
		if c[k] < v {
			return true
		}
	}
	return false
}
