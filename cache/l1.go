package cache

// This file is the L1 half of a table: building, installing and dropping entries, and the
// generations that keep a fill begun before an invalidation from installing after it.

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/echocache/echocache/tables"
)

// newEntry builds an L1 entry for a value (or a not-found) whose row had ttl left at base.
func (t *Table[K, V]) newEntry(v V, notFound bool, base int64, ttl pttl, delta time.Duration, version string) *entry[V] {
	e := &entry[V]{value: v, notFound: notFound, rowExpires: math.MaxInt64, refreshFrom: math.MaxInt64, version: version, fetched: base}
	l1 := t.spec.L1TTL
	if ttl >= 0 {
		rowTTL := time.Duration(ttl) * time.Millisecond
		e.rowExpires = clockAfter(base, rowTTL)
		l1 = min(l1, rowTTL)
		if !notFound && t.spec.EarlyRefreshEnabled() && delta > 0 {
			e.deltaBeta = t.spec.EarlyRefreshBeta * float64(delta)
			e.refreshFrom = e.rowExpires - int64(e.deltaBeta*xfetchSpan)
		}
	}
	e.expires = clockAfter(base, l1)
	e.check = min(e.expires, e.refreshFrom) - int64(clockGuard)
	return e
}

// clockAfter is the clock time d after t, saturating at math.MaxInt64: a row or an L1TTL as
// long as a time.Duration goes must not wrap a deadline into the past.
func clockAfter(t int64, d time.Duration) int64 {
	if d > 0 && t > math.MaxInt64-int64(d) {
		return math.MaxInt64
	}
	return t + int64(d)
}

// install is the one door into L1: every entry enters through it, so an install can be
// refused when its id was dropped, invalidated or flushed after the read that produced it
// began (g is the id's generation read before that read). ristretto applies new entries
// asynchronously; install waits until the entry is applied, so the caller's next Get finds
// it (unless a full L1's admission policy turned it away), and checks the generation again
// afterwards: a drop that raced the write is applied again, after it.
func (t *Table[K, V]) install(id K, g gen, e *entry[V]) bool {
	if t.hookBeforeInstall != nil {
		t.hookBeforeInstall(t.ops.format(id))
	}
	if t.l1 == nil || e.expires <= t.clk.precise() {
		return false
	}
	// Until the table's invalidation subscription is confirmed, L1 takes nothing: an entry
	// installed then could miss its invalidation.
	if t.cs == nil || !t.cs.synced() {
		return false
	}
	// Installs hold the cache's read lock so that Close, which takes the write lock before
	// it closes L1, never closes it under one.
	t.c.mu.RLock()
	defer t.c.mu.RUnlock()
	if t.c.closed {
		return false
	}
	if !t.gens.same(g) {
		t.st.installsRefused.Add(1)
		return false
	}
	t.l1.Set(id, e, 1)
	t.l1.Wait()
	if !t.gens.same(g) {
		t.l1.Del(id)
		t.st.installsRefused.Add(1)
		return false
	}
	return true
}

// Forget drops id from this process's L1 (not from L2), and keeps fills already in flight
// from installing it again. It is the local half of an invalidation.
//
// An id L1 does not hold is not deleted: ristretto queues every Del for its policy goroutine,
// a wake-up on the path of every invalidation, and most ids an invalidation names are not in
// a given process's L1. An install racing this is safe without it: install sets, waits until
// the set is applied, and deletes the id itself when its generation moved meanwhile.
func (t *Table[K, V]) Forget(id K) {
	t.gens.bump(stripeOf(id, t.ops))
	if t.l1 != nil {
		t.c.mu.RLock()
		if !t.c.closed {
			if _, ok := t.l1.Get(id); ok {
				t.l1.Del(id)
			}
		}
		t.c.mu.RUnlock()
	}
}

// ForgetAll drops every id of the table from this process's L1 (not from L2), and keeps
// fills already in flight from installing anything read before it.
func (t *Table[K, V]) ForgetAll() { t.flushL1() }

func (t *Table[K, V]) flushL1() {
	t.gens.bumpAll()
	if t.l1 != nil {
		t.c.mu.RLock()
		defer t.c.mu.RUnlock()
		t.l1Mu.Lock() // ristretto's Clear must not run twice at once
		defer t.l1Mu.Unlock()
		if !t.c.closed {
			t.l1.Clear()
		}
	}
}

func (t *Table[K, V]) dropIDs(ids []string) {
	for _, s := range ids {
		if id, err := t.ops.parse(s); err == nil {
			t.Forget(id)
		}
	}
}

// closeL1 closes L1; Close calls it once no install, drop or flush can start.
func (t *Table[K, V]) closeL1() {
	if t.l1 != nil {
		t.l1.Close()
	}
}

func (t *Table[K, V]) declared() tables.Table { return t.decl }

func (t *Table[K, V]) attach(g *tableGroup) { t.cs = g }

// generations are the per-id generations that make L1 installs refusable: a fill reads its
// id's generation before its L2 read and installs only if it has not moved. An id's
// generation lives in one of genStripes counters picked by its hash (ids sharing a stripe
// merely refuse each other's installs now and then), and a table-wide epoch covers flushes.
type generations struct {
	epoch   atomic.Uint64
	stripes [genStripes]atomic.Uint64
}

const genStripes = 1024

// gen is a generation as read before a fill.
type gen struct {
	epoch, n uint64
	stripe   uint32
}

func stripeOf[K ID](id K, ops idOps[K]) uint32 {
	h, _ := ops.hash(id)
	return uint32((h * 0x9E3779B97F4A7C15) >> (64 - 10))
}

func (g *generations) read(stripe uint32) gen {
	return gen{epoch: g.epoch.Load(), n: g.stripes[stripe].Load(), stripe: stripe}
}

func (g *generations) same(r gen) bool {
	return g.epoch.Load() == r.epoch && g.stripes[r.stripe].Load() == r.n
}

func (g *generations) bump(stripe uint32) { g.stripes[stripe].Add(1) }

func (g *generations) bumpAll() { g.epoch.Add(1) }
