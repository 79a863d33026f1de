package cache

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/topic"
)

// Coherence across processes. Every write ([Table.Set], [Table.Invalidate],
// [Table.InvalidateAll]) is one script that changes the rows, bumps the table's sequence in
// its coherence record ecc:{<table>} (hash: epoch, seq) and publishes
// "<epoch>\n<seq>\n<server µs>\n<id>..." on the table's channel, from the table's slot, so
// every subscriber sees one table's sequence in order. Each Cache holds one subscription
// (package topic) for all its tables and keeps, per table, the (epoch, seq) it has seen:
//
//   - a message with the next seq drops its ids from L1; an older one (a duplicate, or one
//     overtaken by a reconcile) still drops them and changes nothing else;
//   - a message whose seq jumps by more than one is a gap: messages were lost, so the table's
//     L1 is flushed (all of it: which ids were lost is unknown);
//   - a message of another epoch (a whole-table invalidation, or a record that vanished with
//     FLUSHALL or a restart without persistence and was made again) flushes the table;
//   - an overflow of the subscription's queue flushes every table; the next message or
//     record read is then adopted without a flush;
//   - a resubscribe and every reconcile (each [Config].ReconcileInterval) read the records;
//     a table whose record moved past what was seen gets a short grace for the messages in
//     flight to arrive, and is flushed if they did not. A record that vanished flushes the
//     table. Nothing moved means no flush.
//
// So a lost message costs at most one reconcile interval of staleness, and a flush happens
// only when something was missed.

// invalidateBatch is how many ids one cache_invalidate call carries.
const invalidateBatch = 256

// flushScanCount is cache_flush's SCAN COUNT per call.
const flushScanCount = 1000

// maxRetired bounds the epochs a table remembers as past, so late messages of an epoch it
// left are not taken for a new one.
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
	subCount int // channels sub covers

	mu        sync.Mutex
	byName    map[string]*tableState
	byChannel map[string]*tableState
	pending   map[*tableState]bool

	// hooks for tests; set before the first table is declared.
	hookMessage func(table string, payload []byte) bool // false drops the message
	hookDropped func(table string, ids []string)        // after a message's ids were dropped
}

// tableState is one table's coherence state and counters.
type tableState struct {
	name string
	keys keys.Table
	core tableCore

	synced atomic.Bool // the initial record read is done: L1 may take installs

	mu      sync.Mutex
	epoch   string // "" while no record was seen
	seq     int64
	resync  bool     // flushed after an overflow: adopt the next (epoch, seq) seen
	retired []string // past epochs
	// before the initial read: the newest (epoch, seq) a message carried
	preEpoch string
	preSeq   int64

	// degradedSince is when the table entered degraded mode (unix ns), 0 when it is not in it.
	degradedSince atomic.Int64

	sent, received, gaps, flushes, reconciles atomic.Int64
	delayN, delaySum, delayMax                atomic.Int64 // propagation, ns
}

// newCoherence starts the subscriber and reconciler for c; cfg has its defaults filled in.
func newCoherence(c *Cache, cfg Config) (*coherence, error) {
	topics, err := topic.New(c.client, topic.Config{SubscribeBuffer: cfg.SubscribeBuffer})
	if err != nil {
		return nil, err
	}
	interval := cfg.ReconcileInterval
	grace := min(max(interval/5, 20*time.Millisecond), 250*time.Millisecond)
	subWait := cfg.SubscribeTimeout
	co := &coherence{
		c: c, topics: topics, period: max(interval-grace, interval/2), grace: grace, subWait: subWait,
		stop: make(chan struct{}), done: make(chan struct{}), kick: make(chan struct{}, 1),
		byName: map[string]*tableState{}, byChannel: map[string]*tableState{}, pending: map[*tableState]bool{},
	}
	go co.run()
	return co, nil
}

// add tracks a newly declared table and marks it pending for the background loop, which
// subscribes its channel and reads its record (Cache.register waits for that through
// syncTables, up to the subscribe timeout). Until then the table works without L1.
func (co *coherence) add(decl keys.Table, core tableCore) *tableState {
	ts := &tableState{name: decl.Name(), keys: decl, core: core}
	co.mu.Lock()
	co.byName[ts.name] = ts
	co.byChannel[decl.Inval()] = ts
	co.mu.Unlock()
	return ts
}

// syncTables subscribes every tracked table and reads the record of those not yet synced.
func (co *coherence) syncTables(ctx context.Context) {
	co.subMu.Lock()
	defer co.subMu.Unlock()
	select {
	case <-co.stop:
		return // closed: no new subscription
	default:
	}
	co.mu.Lock()
	channels := make([]string, 0, len(co.byChannel))
	var unsynced []*tableState
	for ch, ts := range co.byChannel {
		channels = append(channels, ch)
		if !ts.synced.Load() {
			unsynced = append(unsynced, ts)
		}
	}
	co.mu.Unlock()
	if len(unsynced) == 0 {
		return
	}
	if co.sub == nil || co.subCount != len(channels) {
		sub, err := co.topics.SubscribeChannels(ctx, channels, co.handle)
		if err != nil {
			co.c.log.Warn("cache: subscribing to invalidations failed; L1 stays off until it succeeds", "err", err)
			return
		}
		// The new subscription is confirmed before the old one ends: no message falls between.
		if co.sub != nil {
			co.sub.Close()
		}
		co.sub, co.subCount = sub, len(channels)
	}
	recs, err := co.readRecords(ctx, unsynced)
	if err != nil {
		co.c.log.Warn("cache: reading coherence records failed", "err", err)
		return
	}
	for i, ts := range unsynced {
		ts.mu.Lock()
		r := recs[i]
		ts.epoch, ts.seq = r.epoch, r.seq
		if ts.preEpoch != "" && ts.preEpoch == r.epoch && ts.preSeq > r.seq {
			ts.seq = ts.preSeq
		}
		ts.mu.Unlock()
		// Whatever L1 took before the subscription was confirmed may have missed a message.
		ts.core.flushL1()
		ts.synced.Store(true)
	}
}

// record is a coherence record as read.
type record struct {
	exists bool
	epoch  string
	seq    int64
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

// wake makes the background loop look at its state again (the breaker opened: it probes).
func (co *coherence) wake() {
	select {
	case co.kick <- struct{}{}:
	default:
	}
}

// handle runs on the subscription's delivery goroutine, never on the connection's reader:
// package topic queues events and reports an Overflow rather than block or drop silently.
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
		epoch, seq, at, ids, ok := parseInval(ev.Payload)
		if !ok {
			co.c.log.Warn("cache: unreadable invalidation message; flushing the table", "table", ts.name)
			ts.flush()
			return
		}
		ts.onMessage(epoch, seq, at, ids)
		if co.hookDropped != nil {
			co.hookDropped(ts.name, ids)
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
		all := make([]*tableState, 0, len(co.byName))
		for _, ts := range co.byName {
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

// parseInval reads "<epoch>\n<seq>\n<µs>[\n<id>...]".
func parseInval(p []byte) (epoch string, seq int64, at int64, ids []string, ok bool) {
	parts := strings.Split(string(p), "\n")
	if len(parts) < 3 || parts[0] == "" {
		return "", 0, 0, nil, false
	}
	seq, err1 := strconv.ParseInt(parts[1], 10, 64)
	at, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil {
		return "", 0, 0, nil, false
	}
	return parts[0], seq, at, parts[3:], true
}

func (ts *tableState) flush() {
	ts.flushes.Add(1)
	ts.core.flushL1()
}

func (ts *tableState) isRetired(epoch string) bool {
	for _, e := range ts.retired {
		if e == epoch {
			return true
		}
	}
	return false
}

// adopt makes (epoch, seq) the seen state, retiring the old epoch. Called with mu held.
func (ts *tableState) adopt(epoch string, seq int64) {
	if ts.epoch != "" && ts.epoch != epoch {
		ts.retired = append(ts.retired, ts.epoch)
		if len(ts.retired) > maxRetired {
			ts.retired = ts.retired[1:]
		}
	}
	ts.epoch, ts.seq = epoch, seq
}

// onMessage applies one invalidation message.
func (ts *tableState) onMessage(epoch string, seq, atMicros int64, ids []string) {
	ts.received.Add(1)
	if d := time.Now().UnixMicro() - atMicros; atMicros > 0 {
		ns := max(d, 0) * int64(time.Microsecond)
		ts.delayN.Add(1)
		ts.delaySum.Add(ns)
		for {
			m := ts.delayMax.Load()
			if ns <= m || ts.delayMax.CompareAndSwap(m, ns) {
				break
			}
		}
	}
	flush := false
	ts.mu.Lock()
	switch {
	case !ts.synced.Load():
		// The initial read has not happened: L1 takes no installs yet, so only remember the
		// newest position for it.
		if epoch != ts.preEpoch || seq > ts.preSeq {
			ts.preEpoch, ts.preSeq = epoch, seq
		}
	case ts.resync:
		ts.resync = false
		ts.adopt(epoch, seq)
	case epoch == ts.epoch:
		switch {
		case seq == ts.seq+1:
			ts.seq = seq
		case seq > ts.seq+1:
			ts.gaps.Add(1)
			flush = true
			ts.seq = seq
		}
	case ts.isRetired(epoch):
		// A late message of an epoch already left: its ids are dropped below.
	case ts.epoch == "" && seq == 1:
		ts.adopt(epoch, seq) // the record was just made: nothing was missed
	default:
		flush = true // a new epoch: a whole-table invalidation or a lost record
		ts.adopt(epoch, seq)
	}
	ts.mu.Unlock()
	if flush {
		ts.flush()
		return
	}
	if len(ids) > 0 {
		ts.core.dropIDs(ids)
	}
}

// behind reports whether r is past what the table has seen.
func (ts *tableState) behind(r record) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.resync {
		return true
	}
	if !r.exists {
		return ts.epoch != ""
	}
	return r.epoch != ts.epoch || r.seq > ts.seq
}

// verify settles the table against r, read at least a grace before: whatever is still
// missing was lost.
func (ts *tableState) verify(r record) {
	flush := false
	ts.mu.Lock()
	switch {
	case ts.resync:
		ts.resync = false // flushed at the overflow already
		if r.exists {
			ts.adopt(r.epoch, r.seq)
		} else {
			ts.adopt("", 0)
		}
	case !r.exists:
		if ts.epoch != "" {
			flush = true // the record vanished: data loss on the server
			ts.adopt("", 0)
		}
	case r.epoch == ts.epoch:
		if r.seq > ts.seq {
			flush = true
			ts.seq = r.seq
		}
	case ts.isRetired(r.epoch):
		// The table already moved on past this record (it was read before a newer message).
	default:
		flush = true
		ts.adopt(r.epoch, r.seq)
	}
	ts.mu.Unlock()
	if flush {
		ts.flush()
	}
}

// run is the background loop: a reconcile every period, a check of resubscribed tables as
// soon as they are reported, and the retry of a subscription that failed.
func (co *coherence) run() {
	defer close(co.done)
	tick := time.NewTicker(co.period)
	defer tick.Stop()
	probe := time.NewTimer(co.c.brk.probe)
	defer probe.Stop()
	for {
		var which []*tableState
		// While the breaker is open, every table is reconciled each probe interval: the
		// record read is the probe, and the reconcile that succeeds settles the tables.
		var probing <-chan time.Time
		if !co.c.brk.allow() {
			probe.Reset(co.c.brk.probe)
			probing = probe.C
		}
		select {
		case <-co.stop:
			return
		case <-tick.C:
			which = co.all()
		case <-probing:
			which = co.all()
		case <-co.kick:
			co.mu.Lock()
			for ts := range co.pending {
				which = append(which, ts)
			}
			clear(co.pending)
			co.mu.Unlock()
		}
		co.reconcile(which)
	}
}

// all is every tracked table; the pending checks it covers are cleared.
func (co *coherence) all() []*tableState {
	co.mu.Lock()
	defer co.mu.Unlock()
	which := make([]*tableState, 0, len(co.byName))
	for _, ts := range co.byName {
		which = append(which, ts)
	}
	clear(co.pending)
	return which
}

// reconcile reads the records of tss (pipelined: one round trip, per slot on a cluster) and
// flushes the tables whose record moved past what they saw, after a grace for messages in
// flight.
func (co *coherence) reconcile(tss []*tableState) {
	if len(tss) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), co.period)
	defer cancel()
	stop := context.AfterFunc(co.c.closing, cancel)
	defer stop()
	co.syncTables(ctx)
	var synced []*tableState
	for _, ts := range tss {
		if ts.synced.Load() {
			synced = append(synced, ts)
		}
	}
	if len(synced) == 0 {
		return
	}
	recs, err := co.readRecords(ctx, synced)
	if err != nil {
		co.c.log.Warn("cache: reconcile: reading coherence records failed", "err", err)
		return
	}
	// Valkey answered: an open breaker closes, and each table leaves degraded mode once its
	// record is settled below (flushed if it moved while nothing could be confirmed).
	// Invalidations refused during an outage go first, before reads return to L2: their
	// rows may hold values the database no longer has.
	for _, ts := range synced {
		if ts.core.pendingCount() != 0 {
			if err := ts.core.retryPending(ctx); err != nil {
				co.c.log.Warn("cache: reconcile: sending pending invalidations failed", "table", ts.name, "err", err)
			}
		}
	}
	co.c.brk.close()
	defer func() {
		for _, ts := range synced {
			ts.leaveDegraded(co.c.log)
		}
	}()
	var moved []int
	for i, ts := range synced {
		ts.reconciles.Add(1)
		if ts.behind(recs[i]) {
			moved = append(moved, i)
		}
	}
	if len(moved) == 0 {
		return
	}
	t := time.NewTimer(co.grace)
	defer t.Stop()
	select {
	case <-co.stop:
		return
	case <-t.C:
	}
	for _, i := range moved {
		synced[i].verify(recs[i])
	}
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

// fillStats fills the coherence counters of s.
func (ts *tableState) fillStats(s *Stats) {
	if ts == nil {
		return
	}
	s.InvalidationsSent = ts.sent.Load()
	s.InvalidationsReceived = ts.received.Load()
	s.Gaps = ts.gaps.Load()
	s.Flushes = ts.flushes.Load()
	s.Reconciles = ts.reconciles.Load()
	if since := ts.degradedSince.Load(); since != 0 {
		s.Degraded, s.DegradedSince = true, time.Unix(0, since)
	}
	s.PropagationCount = ts.delayN.Load()
	s.PropagationTotal = time.Duration(ts.delaySum.Load())
	s.PropagationMax = time.Duration(ts.delayMax.Load())
}
