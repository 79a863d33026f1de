package cache

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"sync/atomic"
	"time"

	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
	"github.com/echocache/echocache/tables"
)

// The publisher: one goroutine per Cache that lists the declared tables in the registry
// (registry.go; again each relistEvery) and, every Config.StatsInterval, publishes each table's [Stats] to
// ecc:{<table>}#stats for tools in other processes ([ReadStats]). A table is listed and
// published at once when it is declared; Close withdraws the snapshots.
//
// Its round trips share the client's connections with the reads, and with a server that
// stopped answering, a read sent while a longer-bounded report was pending took as long as the
// report's bound (5 s, in 2 of 10 runs of TestL2TimeoutBoundsReads): so each round is bounded
// by the shortest L2Timeout of the Cache's tables, never longer than a read, and none is sent
// while the breaker is open (Valkey is failing; the registry is tried again later, the
// snapshots expire by themselves).

// Defaults and bounds of the stats a Cache publishes.
const (
	// DefaultStatsInterval is how often a Cache publishes its tables' stats.
	DefaultStatsInterval = 5 * time.Second
	// MinStatsInterval and MaxStatsInterval bound Config.StatsInterval: a snapshot lives 3
	// intervals, at most the 24 h the report script accepts.
	MinStatsInterval = 10 * time.Millisecond
	MaxStatsInterval = 8 * time.Hour

	statsLives    = 3           // intervals a snapshot stays live
	statsPrune    = 16          // other fields each report checks for expiry
	listRetryWait = time.Second // between registry attempts when stats are off
	// relistEvery is how long a Cache trusts that a table it listed is still in the registry:
	// the entry may be lost (a forced failover to a replica that lagged, an operator's ZREM
	// of a table still in use), and one ZADD NX per table and minute brings it back.
	relistEvery = time.Minute
)

var (
	scriptStatsReport = lua.Get("cache_stats_report")
	scriptStatsRead   = lua.Get("cache_stats_read")
)

// defaultID is a Cache's id when Config names none: <host>-<pid>-<8 random hex>.
func defaultID() string {
	host, err := os.Hostname()
	if err != nil || keys.ValidateID(host) != nil || len(host) > 256 {
		host = "host"
	}
	return fmt.Sprintf("%s-%d-%08x", host, os.Getpid(), rand.Uint32())
}

// tableSnapshot is what a Cache publishes for one table: FORMAT tablestats of
// lua/cache_stats_report.lua.
type tableSnapshot struct {
	V                     int   `json:"v"`
	EveryMS               int64 `json:"every_ms"`
	L1Hits                int64 `json:"l1_hits"`
	L2Hits                int64 `json:"l2_hits"`
	Misses                int64 `json:"misses"`
	Loads                 int64 `json:"loads"`
	LoadErrors            int64 `json:"load_errors"`
	LoadNS                int64 `json:"load_ns"`
	FillsRefused          int64 `json:"fills_refused"`
	SetsRefused           int64 `json:"sets_refused"`
	InstallsRefused       int64 `json:"installs_refused"`
	CorruptRows           int64 `json:"corrupt_rows"`
	EarlyRefreshes        int64 `json:"early_refreshes"`
	LeaseWaits            int64 `json:"lease_waits"`
	LeaseTakeovers        int64 `json:"lease_takeovers"`
	StaleServed           int64 `json:"stale_served"`
	DegradedLoads         int64 `json:"degraded_loads"`
	BreakerOpens          int64 `json:"breaker_opens"`
	InvalidationsSent     int64 `json:"invalidations_sent"`
	InvalidationsReceived int64 `json:"invalidations_received"`
	Gaps                  int64 `json:"gaps"`
	Regressions           int64 `json:"regressions"`
	Flushes               int64 `json:"flushes"`
	Reconciles            int64 `json:"reconciles"`
	PropagationCount      int64 `json:"propagation_count"`
	PropagationTotalNS    int64 `json:"propagation_total_ns"`
	PropagationMaxNS      int64 `json:"propagation_max_ns"`
	// PropagationHist is Stats.PropagationHistogram: [up_to_ns, count] per non-empty bucket.
	PropagationHist      [][2]int64 `json:"propagation_hist,omitempty"`
	Degraded             bool       `json:"degraded"`
	DegradedSinceMS      int64      `json:"degraded_since_ms"`
	PendingInvalidations int        `json:"pending_invalidations"`
	// At and Exp are written by the script (FORMAT report); a publisher never sends them.
	At  int64 `json:"at,omitempty"`
	Exp int64 `json:"exp,omitempty"`
}

func snapshotOf(s Stats, every time.Duration) tableSnapshot {
	out := tableSnapshot{
		V: 1, EveryMS: every.Milliseconds(),
		L1Hits: s.L1Hits, L2Hits: s.L2Hits, Misses: s.Misses, Loads: s.Loads, LoadErrors: s.LoadErrors,
		LoadNS: int64(s.LoadTime), FillsRefused: s.FillsRefused, SetsRefused: s.SetsRefused,
		InstallsRefused: s.InstallsRefused, CorruptRows: s.CorruptRows, EarlyRefreshes: s.EarlyRefreshes,
		LeaseWaits: s.LeaseWaits, LeaseTakeovers: s.LeaseTakeovers, StaleServed: s.StaleServed,
		DegradedLoads: s.DegradedLoads, BreakerOpens: s.BreakerOpens,
		InvalidationsSent: s.InvalidationsSent, InvalidationsReceived: s.InvalidationsReceived,
		Gaps: s.Gaps, Regressions: s.Regressions, Flushes: s.Flushes, Reconciles: s.Reconciles,
		PropagationCount: s.PropagationCount, PropagationTotalNS: int64(s.PropagationTotal),
		PropagationMaxNS: int64(s.PropagationMax), Degraded: s.Degraded,
		PendingInvalidations: s.PendingInvalidations,
	}
	if !s.DegradedSince.IsZero() {
		out.DegradedSinceMS = s.DegradedSince.UnixMilli()
	}
	for _, b := range s.PropagationHistogram {
		out.PropagationHist = append(out.PropagationHist, [2]int64{int64(b.UpTo), b.Count})
	}
	return out
}

func (s tableSnapshot) stats() Stats {
	out := Stats{
		L1Hits: s.L1Hits, L2Hits: s.L2Hits, Misses: s.Misses, Loads: s.Loads, LoadErrors: s.LoadErrors,
		LoadTime: time.Duration(s.LoadNS), FillsRefused: s.FillsRefused, SetsRefused: s.SetsRefused,
		InstallsRefused: s.InstallsRefused, CorruptRows: s.CorruptRows, EarlyRefreshes: s.EarlyRefreshes,
		LeaseWaits: s.LeaseWaits, LeaseTakeovers: s.LeaseTakeovers, StaleServed: s.StaleServed,
		DegradedLoads: s.DegradedLoads, BreakerOpens: s.BreakerOpens,
		InvalidationsSent: s.InvalidationsSent, InvalidationsReceived: s.InvalidationsReceived,
		Gaps: s.Gaps, Regressions: s.Regressions, Flushes: s.Flushes, Reconciles: s.Reconciles,
		PropagationCount: s.PropagationCount, PropagationTotal: time.Duration(s.PropagationTotalNS),
		PropagationMax: time.Duration(s.PropagationMaxNS), Degraded: s.Degraded,
		PendingInvalidations: s.PendingInvalidations,
	}
	if s.DegradedSinceMS > 0 {
		out.DegradedSince = time.UnixMilli(s.DegradedSinceMS)
	}
	// A foreign publisher's list may be unsorted or repeat a bucket: merging each bucket in
	// turn keeps the list sorted and summed either way.
	for _, b := range s.PropagationHist {
		if b[1] > 0 {
			out.PropagationHistogram = mergeHistograms(out.PropagationHistogram,
				[]HistogramBucket{{UpTo: time.Duration(b[0]), Count: b[1]}})
		}
	}
	out.PropagationP50 = histogramQuantile(out.PropagationHistogram, 0.5)
	out.PropagationP99 = histogramQuantile(out.PropagationHistogram, 0.99)
	return out
}

// publisher is a Cache's listing and reporting goroutine.
type publisher struct {
	c     *Cache
	id    string
	every time.Duration // negative: list only
	kick  chan struct{} // capacity 1: a table was declared
	quit  chan struct{}
	done  chan struct{}

	// Owned by the goroutine.
	listed    map[string]time.Time // when ZADD NX last succeeded
	published map[string]bool
	relist    atomic.Int64 // nanoseconds; relistEvery unless a test sets it (export_test.go)
}

func startPublisher(c *Cache, id string, every time.Duration) *publisher {
	p := &publisher{c: c, id: id, every: every, kick: make(chan struct{}, 1), quit: make(chan struct{}),
		done: make(chan struct{}), listed: map[string]time.Time{}, published: map[string]bool{}}
	p.relist.Store(int64(relistEvery))
	go p.run()
	return p
}

// declared tells the publisher a table was declared: it is listed and published at once.
func (p *publisher) declared() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// stop withdraws the snapshots and ends the goroutine; it waits for it.
func (p *publisher) stop() {
	close(p.quit)
	<-p.done
}

func (p *publisher) run() {
	defer close(p.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-p.quit:
			p.withdraw()
			return
		case <-p.kick:
		case <-timer.C:
		}
		pending := p.round()
		switch {
		case p.every > 0:
			timer.Reset(p.every)
		case pending:
			timer.Reset(listRetryWait)
		default:
			timer.Reset(time.Duration(p.relist.Load()))
		}
	}
}

// round lists the tables not listed in the last relist interval and publishes every table's
// snapshot; it reports whether a table is still to be listed.
func (p *publisher) round() (pending bool) {
	c := p.c
	c.mu.RLock()
	names := make([]string, 0, len(c.cores))
	stats := make([]Stats, 0, len(c.cores))
	builders := make([]keys.Table, 0, len(c.cores))
	var bound time.Duration
	for name, t := range c.cores {
		names = append(names, name)
		stats = append(stats, t.stats())
		builders = append(builders, t.declared().Keys)
		if d := t.declared().Spec.L2Timeout; bound == 0 || d < bound {
			bound = d
		}
	}
	c.mu.RUnlock()
	if len(names) == 0 {
		return false
	}
	if !c.brk.allow() {
		return len(p.listed) < len(names)
	}
	ctx, cancel := context.WithTimeout(c.closing, bound)
	defer cancel()
	for _, name := range names {
		if at, ok := p.listed[name]; ok && time.Since(at) < time.Duration(p.relist.Load()) {
			continue
		}
		if err := listTable(ctx, c.client, name); err != nil {
			c.log.Debug("cache: listing a table in the registry failed; trying again", "table", name, "err", err)
			pending = true
			continue
		}
		p.listed[name] = time.Now()
	}
	if p.every <= 0 {
		return pending
	}
	ttl := fmt.Sprint((statsLives * p.every).Milliseconds())
	runs := make([]lua.Run, len(names))
	for i := range names {
		body, _ := json.Marshal(snapshotOf(stats[i], p.every)) // plain fields: cannot fail
		runs[i] = lua.Run{Script: scriptStatsReport, Keys: []string{builders[i].Stats()}, Args: []string{p.id, string(body), ttl, fmt.Sprint(statsPrune)}}
	}
	replies, _ := lua.Pipeline(ctx, c.client, runs, nil)
	for i, r := range replies {
		if err := r.Error(); err != nil {
			c.log.Debug("cache: publishing a table's stats failed", "table", names[i], "err", err)
			continue
		}
		p.published[names[i]] = true
	}
	return pending
}

// withdraw removes this Cache's snapshots, at Close, bounded like a round (the tables are
// still declared: Close closes their L1s after this).
func (p *publisher) withdraw() {
	if len(p.published) == 0 || !p.c.brk.allow() {
		return
	}
	var bound time.Duration
	runs := make([]lua.Run, 0, len(p.published))
	p.c.mu.RLock()
	for name := range p.published {
		runs = append(runs, lua.Run{Script: scriptStatsReport, Keys: []string{keys.MustTable(name).Stats()}, Args: []string{p.id, "", "1", "0"}})
		if t, ok := p.c.cores[name]; ok {
			if d := t.declared().Spec.L2Timeout; bound == 0 || d < bound {
				bound = d
			}
		}
	}
	p.c.mu.RUnlock()
	ctx, cancel := context.WithTimeout(context.Background(), cmp.Or(bound, tables.DefaultL2Timeout))
	defer cancel()
	replies, _ := lua.Pipeline(ctx, p.c.client, runs, nil)
	for _, r := range replies {
		if err := r.Error(); err != nil {
			p.c.log.Debug("cache: withdrawing the stats failed; they expire by themselves", "err", err)
		}
	}
}
