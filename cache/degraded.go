package cache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/echocache/echocache/internal/panics"
)

// Degraded mode. When L2 fails or times out on a Get (or the cache's breaker is open, so L2
// is not tried), a table with degraded mode on (tables.Spec.DegradedLoads, on by default)
// answers from its loader instead of failing: a cache outage must not become a read outage
// of the database behind it. The load is single-flight per id in the process, and at most
// DegradedLoads run at once per table, so the database is not stampeded; a read that waits
// longer than the L2 timeout for one of those slots fails with ErrDegradedBusy. Nothing is
// written to L2. The result is kept in L1 for at most min(L1TTL, DegradedL1TTL), since no
// invalidation can be confirmed meanwhile. The table stays degraded (Stats.Degraded, a log
// line when it enters and one when it leaves, with how long) until a reconcile has read its
// coherence record again and flushed its L1 if the record moved, and has sent every
// invalidation the table owes (writes refused during the outage, or a whole-table
// invalidation after a regression): while it owes any, its reads skip L2 and go to the
// loader even with Valkey answering, since an owed row may hold a value the database no
// longer has. (With degraded mode off, such reads go to L2 as usual.)
//
// L1 entries taken before the outage are not dropped when it begins: a degraded table still
// serves them, until their own deadline (min(L1TTL, the row's remaining PTTL)). No reconcile
// can read the record meanwhile, so an invalidation this process missed (a message lost just
// before the outage, or one published while only this process was cut off from Valkey) costs
// up to that deadline, not one reconcile interval; the first reconcile after the outage
// flushes the table if its record moved. A table that must not serve such an entry longer
// than some bound during an outage keeps its L1TTL within that bound.

// ErrDegradedBusy is wrapped by a degraded read that found every degraded-load slot of its
// table taken for longer than the table's L2Timeout.
var ErrDegradedBusy = errors.New("cache: degraded loads busy")

// errOwing is why a table that owes invalidations reads from its loader (degradedGet's
// cause, for the log line).
var errOwing = errors.New("cache: the table owes invalidations that have not reached Valkey yet")

// degrades reports whether err, from L2 on a read of a caller whose context is still live,
// sends the read to the loader.
func (t *Table[K, V]) degrades(ctx context.Context, err error) bool {
	return t.spec.DegradedEnabled() && ctx.Err() == nil && errors.Is(err, ErrL2) && !t.c.isClosed()
}

// unavailable is the error of a read that skipped L2 because the breaker is open.
func (t *Table[K, V]) unavailable(idStr string) error {
	return fmt.Errorf("%w: table %s: reading %q: %w", ErrL2, t.spec.Name, idStr, ErrL2Unavailable)
}

// degradedGet answers id from the loader because L2 failed with cause.
func (t *Table[K, V]) degradedGet(ctx context.Context, id K, idStr string, cause error) (V, Tier, error) {
	var zero V
	t.cs.enterDegraded(t.c.log, cause)
	g := t.gens.read(stripeOf(id, t.ops)) // before the load: an invalidation after it refuses the install
	ch := t.dsf.DoChan(flightKey(idStr, g), func() (any, error) { return t.degradedLoad(ctx, id, idStr, g) })
	select {
	case r := <-ch:
		if r.Err != nil {
			return zero, TierDegraded, r.Err
		}
		return *r.Val.(*V), TierDegraded, nil
	case <-ctx.Done():
		return zero, TierNone, fmt.Errorf("cache: table %s: waiting for the degraded load of %q: %w", t.spec.Name, idStr, ctx.Err())
	}
}

// degradedLoad is one degraded load of id: a slot, the loader, a short-lived L1 entry.
func (t *Table[K, V]) degradedLoad(callerCtx context.Context, id K, idStr string, g gen) (res any, err error) {
	if !t.c.enter() {
		return nil, ErrClosed
	}
	defer t.c.leave()
	defer func() {
		if p := recover(); p != nil {
			err = panics.New("cache: degraded load of table "+t.spec.Name, p)
		}
	}()
	ctx, cancel := t.c.detach(callerCtx, t.spec.L2Timeout+t.spec.LoaderTimeout)
	defer cancel()
	wait := time.NewTimer(t.spec.L2Timeout)
	defer wait.Stop()
	select {
	case t.degradedSlots <- struct{}{}:
	case <-wait.C:
		return nil, fmt.Errorf("cache: table %s: degraded load of %q: %w (%d at once)", t.spec.Name, idStr, ErrDegradedBusy, t.spec.DegradedLoads)
	case <-ctx.Done():
		return nil, t.degradedErr(idStr, "waiting for a degraded-load slot", ctx.Err())
	}
	defer func() { <-t.degradedSlots }()
	t.st.degradedLoads.Add(1)
	base := t.clk.precise()
	v, _, err := t.callLoader(ctx, id, idStr)
	switch {
	case err == nil:
		t.install(id, g, t.degradedEntry(v, false, base))
		return &v, nil
	case errors.Is(err, ErrNotFound):
		if t.spec.NegativeEnabled() {
			t.install(id, g, t.degradedEntry(v, true, base))
		}
		return nil, ErrNotFound
	}
	if ctx.Err() != nil && t.c.closing.Err() != nil {
		err = fmt.Errorf("%w: %w", ErrClosed, err) // Close cut the load short; the *LoadError names the table and id
	}
	return nil, err
}

// degradedErr is the error of a degraded load of idStr that its (detached) ctx cut short at
// step: Close, which it reports as ErrClosed, or its deadline.
func (t *Table[K, V]) degradedErr(idStr, step string, err error) error {
	if t.c.closing.Err() != nil {
		return fmt.Errorf("cache: table %s: degraded load of %q: %s: %w (%w)", t.spec.Name, idStr, step, ErrClosed, err)
	}
	return fmt.Errorf("cache: table %s: degraded load of %q: %s: %w", t.spec.Name, idStr, step, err)
}

// degradedEntry is the L1 entry of a degraded load that began at base: no row behind it, so
// no early refresh, and a lifetime of min(L1TTL, DegradedL1TTL), and NegativeTTL too for a
// not-found (a not-found row would not live longer, nor its L1 entry on the normal path).
func (t *Table[K, V]) degradedEntry(v V, notFound bool, base int64) *entry[V] {
	e := t.newEntry(v, notFound, base, pttlNoExpiry, 0, "")
	life := min(t.spec.L1TTL, t.spec.DegradedL1TTL)
	if notFound {
		life = min(life, t.spec.NegativeTTL)
	}
	e.expires = clockAfter(base, life)
	e.check = min(e.expires, e.refreshFrom) - int64(clockGuard)
	return e
}

// degradedMany answers GetMany's ids from the loader because L2 failed with cause, each as
// Get would (single-flight, the table's slots), DegradedLoads at a time.
func (t *Table[K, V]) degradedMany(ctx context.Context, ids []K, out map[K]V, cause error) error {
	type res struct {
		v   V
		err error
	}
	results := make([]res, len(ids))
	sem := make(chan struct{}, t.spec.DegradedLoads)
	done := make(chan struct{})
	for i, id := range ids {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; done <- struct{}{} }()
			v, _, err := t.degradedGet(ctx, id, t.ops.format(id), cause)
			results[i] = res{v, err}
		}()
	}
	for range ids {
		<-done
	}
	var errs []error
	for i, r := range results {
		switch {
		case r.err == nil:
			out[ids[i]] = r.v
		case !errors.Is(r.err, ErrNotFound):
			errs = append(errs, r.err)
		}
	}
	return errors.Join(errs...)
}

// enterDegraded marks the table degraded, from now, unless it already is.
func (ts *tableGroup) enterDegraded(log *slog.Logger, cause error) {
	if ts == nil || ts.degradedSince.Load() != 0 {
		return
	}
	if ts.degradedSince.CompareAndSwap(0, time.Now().UnixNano()) {
		log.Warn("cache: table degraded: L2 failed, reads go to the loader until a reconcile settles the table",
			"table", ts.name, "err", cause)
	}
}

// leaveDegraded ends degraded mode after a reconcile settled the table.
func (ts *tableGroup) leaveDegraded(log *slog.Logger) {
	since := ts.degradedSince.Load()
	if since == 0 || !ts.degradedSince.CompareAndSwap(since, 0) {
		return
	}
	log.Info("cache: table left degraded mode", "table", ts.name, "degraded_for", time.Duration(time.Now().UnixNano()-since))
}
