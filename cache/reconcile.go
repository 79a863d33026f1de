package cache

// This file is the coherence loop: the periodic reconcile of every table's record against the
// invalidations received, and the probe for Valkey's return while the breaker is open.

import (
	"context"
	"time"
)

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
	which := make([]*tableState, 0, len(co.byRecord))
	for _, ts := range co.byRecord {
		which = append(which, ts)
	}
	clear(co.pending)
	return which
}

// reconcile reads the records of tss (pipelined: one round trip, per slot on a cluster) and
// flushes the tables whose record moved past what they saw, after a grace for messages in
// flight.
func (co *coherence) reconcile(tss []*tableState) {
	everyTable := !co.c.brk.allow()
	if everyTable {
		// The reconcile that reads the records closes the breaker for every table, so it
		// settles every table, not only those a kick named: a table must not trust its L1
		// again, nor read L2 past its owed invalidations, before its record was read.
		tss = co.all()
	}
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
	before := make([]seen, len(synced))
	for i, ts := range synced {
		before[i] = ts.seen()
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
	if !everyTable && !co.c.brk.allow() {
		// The breaker opened while this reconcile of a few tables ran: closing it is for the
		// probe that follows, which settles every table.
		co.wake()
		return
	}
	groups := groupsOf(synced)
	for _, g := range groupsOf(tss) { // those whose subscription is not synced yet too
		if core := g.shards[0].core; core.pendingCount() != 0 {
			if err := core.retryPending(ctx); err != nil {
				co.c.log.Warn("cache: reconcile: sending pending invalidations failed", "table", g.name, "err", err)
			}
		}
	}
	co.c.brk.close()
	defer func() {
		for _, g := range groups {
			if g.shards[0].core.pendingCount() == 0 { // a table that still owes stays degraded
				g.leaveDegraded(co.c.log)
			}
		}
	}()
	var moved []int
	for i, ts := range synced {
		ts.reconciles.Add(1)
		if ts.behind(recs[i], before[i]) {
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
		synced[i].verify(recs[i], before[i])
	}
}

// tracked is every tracked table's shards, leaving the pending checks as they are.
func (co *coherence) tracked() []*tableState {
	co.mu.Lock()
	defer co.mu.Unlock()
	out := make([]*tableState, 0, len(co.byRecord))
	for _, ts := range co.byRecord {
		out = append(out, ts)
	}
	return out
}

// groupsOf is the tables the shards of tss belong to, each once.
func groupsOf(tss []*tableState) []*tableGroup {
	var out []*tableGroup
	seen := make(map[*tableGroup]bool, len(tss))
	for _, ts := range tss {
		if !seen[ts.group] {
			seen[ts.group] = true
			out = append(out, ts.group)
		}
	}
	return out
}
