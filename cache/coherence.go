package cache

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/tables"
	"github.com/echocache/echocache/topic"
)

// Coherence across processes. Every write ([Table.Set], [Table.Invalidate],
// [Table.InvalidateAll]) is one script that changes the rows, bumps the table's sequence in its
// coherence record ecc:{<table>} (hash: epoch, seq, last: the write's token, and a ring r0..r63
// of the tokens of the last 64 writes, by seq mod 64) and publishes
// "<epoch>\n<seq>\n<server µs>\n<prev token>\n<token>\n<id>..." on the table's channel, from
// the table's slot, so every subscriber sees one table's sequence in order. Each Cache holds one
// subscription (package topic) for all its tables and keeps, per table, the (epoch, seq, token)
// it has seen:
//
//   - a message with the next seq, chained to the token seen last, drops its ids from L1; a
//     duplicate (a recent (seq, token) seen again) still drops them and changes nothing else;
//   - a message whose seq jumps by more than one is a gap: messages were lost, so the table's
//     L1 is flushed (all of it: which ids were lost is unknown), and the table is reconciled
//     at once, to check that the record did not go back in time before the writes that made
//     the gap (see sequence.go);
//   - a message that is neither (seq at or below the last one, or the next seq chained to
//     another token) is a regression: the record went back in time (a restore from a
//     snapshot, a lagging replica promoted); flush once and follow the new sequence, and
//     invalidate the whole table, since its rows went back too (see sequence.go);
//   - a message of another epoch (a whole-table invalidation, or a record that vanished with
//     FLUSHALL or a restart without persistence and was made again) flushes the table;
//   - an overflow of the subscription's queue flushes every table; the next message or
//     record read is then adopted without a flush;
//   - a resubscribe and every reconcile (each [Config].ReconcileInterval) read the records;
//     a table whose record moved past what was seen gets a short grace for the messages in
//     flight to arrive, and is flushed if they did not; a record behind what was seen, or at
//     the same seq with another token, is a regression and flushes too, and so is a record
//     ahead of what was seen whose ring names another token where the table was before the
//     read or is now, and a record back in an epoch the table had left. A record that
//     vanished (FLUSHALL, a restart without persistence: the rows went with it) flushes the
//     table. Writes a reconcile moves a table past stay known, so their messages, if they
//     were only late, are duplicates. Nothing moved means no flush.
//
// So a lost message costs at most one reconcile interval of staleness, and a flush happens
// only when something was missed.

// invalidateBatch is how many ids one cache_invalidate call carries.
const invalidateBatch = 256

// flushScanCount is cache_flush's SCAN COUNT per call (Cache.flushCount, which tests lower).
const flushScanCount = 1000

// maxRetired bounds the epochs a table remembers as past, so late messages of an epoch it
// left are not taken for a new one (a record read back in such an epoch by a reconcile that
// took its position after the table left it is a regression: see verify).
const maxRetired = 4

// coherence is a Cache's subscriber and reconciler.
type coherence struct {
	c        *Cache
	topics   *topic.Topics
	period   time.Duration // between reconciles: the interval minus the grace
	grace    time.Duration // how long a moved record waits for messages in flight
	subWait  time.Duration
	stop     chan struct{}
	done     chan struct{}
	kick     chan struct{} // capacity 1: tables are pending a check
	stopOnce sync.Once

	subMu    sync.Mutex // serializes (re)subscribing
	sub      *topic.Subscription
	subChans []string // the channels sub covers
	swap     swap     // the subscriptions' handlers, and the takeover by a new one (subscription.go)

	mu        sync.Mutex
	byRecord  map[string]*tableState // every shard of every table, by its record's key
	byChannel map[string]*tableState
	pending   map[*tableState]bool

	onInval func(table string, ids []string) // Config.OnInvalidation

	// hooks for tests; set before the first table is declared.
	hookMessage func(table string, payload []byte) bool // false drops the message
	hookDropped func(table string, ids []string)        // after a message was applied (OnInvalidation too)
}

// tableGroup is one table's coherence across its shards (tables.Spec.Shards): a tableState
// per shard, each following its own record and channel, and what belongs to the table as a
// whole. A table of one shard has one tableState.
type tableGroup struct {
	name   string
	shards []*tableState

	allSynced atomic.Bool // every shard's initial record read is done: L1 may take installs

	// degradedSince is when the table entered degraded mode (unix ns), 0 when it is not in it.
	degradedSince atomic.Int64

	sent atomic.Int64 // invalidation messages this process published for the table
}

// synced reports whether every shard's subscription is confirmed and its record read.
func (g *tableGroup) synced() bool {
	if g.allSynced.Load() {
		return true
	}
	for _, ts := range g.shards {
		if !ts.synced.Load() {
			return false
		}
	}
	g.allSynced.Store(true) // a shard never goes back to unsynced
	return true
}

// tableState is the coherence state and counters of one table, or of one shard of a table
// spread over shards: its record, its channel, its sequence.
type tableState struct {
	name  string // the table's
	keys  keys.Table
	core  tableCore
	group *tableGroup

	synced atomic.Bool // the initial record read is done: L1 may take installs

	mu      sync.Mutex
	epoch   string // "" while no record was seen
	seq     int64
	resync  bool        // flushed after an overflow: adopt the next (epoch, seq) seen
	retired []pastEpoch // past epochs, oldest first
	left    int64       // epochs left so far: a pastEpoch's n, and seen.left
	// before the initial read: the newest (epoch, seq, token) a message carried
	preEpoch string
	preSeq   int64
	preLast  string
	// last is the token of the write that made seq ("" while unknown); recent holds the
	// last (seq, token) pairs applied, so a message or record seen again is told from one
	// that went back in time (see sequence.go).
	last    string
	recent  [recentLen]position
	recentI int
	runFrom int64 // the seq from which the pairs in recent were applied without a gap
	// checks are the positions gaps left since a reconcile last checked them: a reconcile
	// compares the record's ring with each, since new writes after a record went back in
	// time may show only as gaps (their messages lost too).
	checks checks
	// onRegression is called (without mu) when a message or a reconcile finds the record
	// gone back in time; onGap when a message skips seqs. Both are set once by add.
	onRegression, onGap func()

	received, gaps, flushes, reconciles, regressions atomic.Int64
	delayN, delaySum, delayMax                       atomic.Int64 // propagation, ns
	delays                                           latencies    // propagation, as a histogram

	// own is the prefix of this cache's write tokens: a message carrying one is this
	// process's own write, whose ids its writer already dropped from L1.
	own string
}

// newCoherence starts the subscriber and reconciler for c; cfg has its defaults filled in.
func newCoherence(c *Cache, cfg Config) (*coherence, error) {
	// Direct delivery: the handler drops ids from L1 and returns; a message spared the
	// hand-off to the subscription's goroutine reaches L1 sooner.
	topics, err := topic.New(c.client, topic.Config{SubscribeBuffer: cfg.SubscribeBuffer, DirectDelivery: true})
	if err != nil {
		return nil, err
	}
	interval := cfg.ReconcileInterval
	grace := min(max(interval/5, 20*time.Millisecond), 250*time.Millisecond)
	subWait := cfg.SubscribeTimeout
	co := &coherence{
		onInval: cfg.OnInvalidation,
		c:       c, topics: topics, period: max(interval-grace, interval/2), grace: grace, subWait: subWait,
		stop: make(chan struct{}), done: make(chan struct{}), kick: make(chan struct{}, 1),
		byRecord: map[string]*tableState{}, byChannel: map[string]*tableState{}, pending: map[*tableState]bool{},
	}
	go co.run()
	return co, nil
}

// add tracks a newly declared table, each of its shards, for the background loop, which
// subscribes their channels and reads their records (Cache.register waits for that through
// syncTables, up to the subscribe timeout). Until then the table works without L1.
func (co *coherence) add(decl tables.Table, core tableCore) *tableGroup {
	g := &tableGroup{name: decl.Spec.Name}
	for _, k := range decl.Shards {
		ts := &tableState{name: g.name, keys: k, core: core, group: g, own: co.c.own}
		ts.onRegression = func() { co.regressed(ts) }
		ts.onGap = func() { co.check(ts) }
		g.shards = append(g.shards, ts)
	}
	co.mu.Lock()
	for _, ts := range g.shards {
		co.byRecord[ts.keys.Record()] = ts
		co.byChannel[ts.keys.Inval()] = ts
	}
	co.mu.Unlock()
	return g
}

// regressed makes ts owe a whole-table invalidation and wakes the background loop, whose
// reconcile of ts sends it (cache_flush: every row deleted, then a new epoch that flushes
// every process's L1) as soon as Valkey answers.
func (co *coherence) regressed(ts *tableState) {
	ts.core.oweAll()
	co.check(ts)
}

// check has the background loop reconcile ts as soon as it can: after a gap, so that the
// record is read while its ring still reaches where the table was before the gap (the ring
// keeps the last 64 writes; a record pushed further cannot be told from one that went back).
func (co *coherence) check(ts *tableState) {
	co.mu.Lock()
	co.pending[ts] = true
	co.mu.Unlock()
	co.wake()
}

// readRecords reads the records of tss in one pipeline, bounded by the longest L2Timeout of
// their tables (it is one round trip for all of them).
func (co *coherence) readRecords(ctx context.Context, tss []*tableState) ([]record, error) {
	recordKeys := make([]string, len(tss))
	var d time.Duration
	for i, ts := range tss {
		recordKeys[i] = ts.keys.Record()
		d = max(d, ts.core.declared().Spec.L2Timeout)
	}
	bctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	recs, err := co.c.fetchRecords(bctx, recordKeys)
	err = l2outcome(ctx, bctx, d, err)
	co.c.brk.observe(err)
	return recs, err
}

// breakerOpened marks every table with degraded mode degraded, read or not (reads skip L2
// from now on, and Stats.Degraded says so; a table without it fails those reads), and wakes
// the background loop, which probes.
func (co *coherence) breakerOpened(cause error) {
	for _, g := range groupsOf(co.tracked()) {
		if g.shards[0].core.declared().Spec.DegradedEnabled() {
			g.enterDegraded(co.c.log, cause)
		}
	}
	co.wake()
}

// wake makes the background loop look at its state again.
func (co *coherence) wake() {
	select {
	case co.kick <- struct{}{}:
	default:
	}
}

// handle runs on the subscription's delivery goroutine, or on the goroutine that receives the
// connection's messages when nothing waits before the message (topic's direct delivery); one
// event at a time either way. Nothing is dropped silently while it runs: package topic queues
// what arrives meanwhile and reports an Overflow when its buffer is full, or, while handle runs
// directly, the messages wait in the connection, and a server that drops it for its output
// limit causes a resubscribe, after which handle has the tables' records checked.
func (co *coherence) handle(ev topic.Event) {
	switch ev.Kind {
	case topic.Message:
		co.mu.Lock()
		ts := co.byChannel[ev.Channel]
		co.mu.Unlock()
		if ts == nil {
			return
		}
		if co.hookMessage != nil && !co.hookMessage(ts.name, ev.Payload) {
			return
		}
		m, ok := parseInval(ev.Payload)
		if !ok {
			co.c.log.Warn("cache: unreadable invalidation message; flushing the table", "table", ts.name)
			ts.flush()
			return
		}
		ts.onMessage(m)
		if co.onInval != nil {
			co.onInval(ts.name, m.ids)
		}
		if co.hookDropped != nil { // last: a test that waits on it sees the message's whole effect
			co.hookDropped(ts.name, m.ids)
		}
	case topic.Subscribed:
		if !ev.Resubscribed {
			return
		}
		// Messages published while the connection was down are lost: check the records.
		co.mu.Lock()
		for _, ch := range ev.Channels {
			if ts := co.byChannel[ch]; ts != nil {
				co.pending[ts] = true
			}
		}
		co.mu.Unlock()
		select {
		case co.kick <- struct{}{}:
		default:
		}
	case topic.Overflow:
		co.mu.Lock()
		all := make([]*tableState, 0, len(co.byRecord))
		for _, ts := range co.byRecord {
			all = append(all, ts)
		}
		co.mu.Unlock()
		for _, ts := range all {
			ts.mu.Lock()
			ts.resync = true
			ts.mu.Unlock()
			ts.flush()
		}
	}
}

func (ts *tableState) flush() {
	ts.flushes.Add(1)
	ts.core.flushL1()
}

// close ends the loop and the subscription. The cache calls it before closing L1s.
func (co *coherence) close() {
	co.stopOnce.Do(func() {
		close(co.stop)
		<-co.done
		co.subMu.Lock()
		if co.sub != nil {
			co.sub.Close()
			co.sub = nil
		}
		co.subMu.Unlock()
	})
}

// fillStats fills the coherence counters of s: the table's, summed over its shards.
func (g *tableGroup) fillStats(s *Stats) {
	if g == nil {
		return
	}
	s.InvalidationsSent = g.sent.Load()
	if since := g.degradedSince.Load(); since != 0 {
		s.Degraded, s.DegradedSince = true, time.Unix(0, since)
	}
	var delays [histBuckets]int64
	defer func() {
		s.PropagationP50, s.PropagationP99 = quantile(&delays, 0.5), quantile(&delays, 0.99)
		s.PropagationHistogram = histogramOf(&delays)
	}()
	for _, ts := range g.shards {
		ts.delays.addTo(&delays)
		s.InvalidationsReceived += ts.received.Load()
		s.Gaps += ts.gaps.Load()
		s.Regressions += ts.regressions.Load()
		s.Flushes += ts.flushes.Load()
		s.Reconciles += ts.reconciles.Load()
		s.PropagationCount += ts.delayN.Load()
		s.PropagationTotal += time.Duration(ts.delaySum.Load())
		s.PropagationMax = max(s.PropagationMax, time.Duration(ts.delayMax.Load()))
	}
}
