package cache

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/echocache/echocache/keys"
)

// Set writes v as id's value through to L2 and invalidates id in every process's L1: one
// script (cache_set) writes the row (with the table's TTL and jitter), bumps the table's
// sequence and publishes the invalidation, all on the table's slot (on a sharded table, the
// slot of id's shard, whose own sequence and channel it uses). A fill of id in flight
// anywhere loses its lease, so the value it loaded never lands in L2. This process's L1
// entry is dropped before Set returns, whatever the outcome, so the next Get here reads the
// row (read-your-own-writes). On error the write may or may not have happened; when Valkey
// could not be reached (or the cache's breaker is open, then Set fails at once with
// ErrL2Unavailable), the table also remembers id and invalidates it everywhere once Valkey
// answers again (see tables.Spec.MaxPendingInvalidations).
//
// On a versioned table ([TableOpts].Version) the script compares v's version with the
// version of the row it would replace and refuses v when the row's is higher: two writers
// that commit A then B to the database but reach Set in the order B, A leave B in L2. A
// refused Set writes, bumps and publishes nothing, and returns nil, counted in
// [Stats].SetsRefused: the newer row is in L2 already, its own Set published its
// invalidation, so no process is left with an older copy; this process drops its entry as
// after any Set and reads the newer row next. An equal version is written (a retry is
// idempotent). Against a row without a version (written before the table was versioned, or
// by an unversioned writer) v is written as on an unversioned table, and so it is where there
// is no row (deleted, expired) or only a fill's lease. Over a lease, a fill that then loads a
// newer value writes it over v (see supersede); where there is no row, a late older v stays
// until the TTL (see the README's "Set with a version").
func (t *Table[K, V]) Set(ctx context.Context, id K, v V) error {
	t.writeMu.RLock()
	defer t.writeMu.RUnlock()
	if t.c.isClosed() {
		return ErrClosed
	}
	idStr := t.ops.format(id)
	shard := t.decl.KeysFor(idStr)
	if _, err := shard.Row(idStr); err != nil {
		return fmt.Errorf("cache: table %s: Set: %w", t.spec.Name, err)
	}
	px := t.jitter(t.spec.TTL)
	token := t.c.writeToken()
	vrow, err := t.valueRowOf(v, idStr, token, 0, px)
	if err != nil {
		return fmt.Errorf("cache: Set: %w", err)
	}
	written := false
	if !t.c.brk.allow() {
		err = t.unavailable(idStr)
	} else {
		written, err = t.c.setRow(ctx, coherenceKeys(shard), token, idStr, vrow, px)
	}
	t.Forget(id)
	if err != nil {
		t.remember(err, idStr)
		return fmt.Errorf("cache: table %s: Set %q: %w", t.spec.Name, idStr, writeOutcome(ctx, err))
	}
	if !written {
		// Refused: a newer version is in L2. Nothing was published, so an invalidation this
		// table owes for id (pending) is still owed.
		t.st.setsRefused.Add(1)
		return nil
	}
	t.pending.done(idStr)
	t.cs.sent.Add(1)
	return nil
}

// Invalidate deletes the rows of ids from L2 and invalidates them in every process's L1: one
// script (cache_invalidate) per up to 256 ids (per shard, on a sharded table) deletes the rows
// (and any fill lease on them), bumps the sequence and publishes the ids. This process's L1
// entries are dropped before it returns. Invalidating an id that has no row is not an error.
// When Valkey cannot be reached, Invalidate returns the error and the table also remembers the
// ids and sends their invalidation once Valkey answers again, so other processes drop their
// copies.
func (t *Table[K, V]) Invalidate(ctx context.Context, ids ...K) error {
	t.writeMu.RLock()
	defer t.writeMu.RUnlock()
	if t.c.isClosed() {
		return ErrClosed
	}
	if len(ids) == 0 {
		return nil
	}
	strs := make([]string, len(ids))
	for i, id := range ids {
		strs[i] = t.ops.format(id)
		if err := keys.ValidateID(strs[i]); err != nil {
			return fmt.Errorf("cache: table %s: Invalidate: %w", t.spec.Name, err)
		}
	}
	var errs []error
	for shard, strs := range t.byShard(strs) {
		tk := coherenceKeys(t.decl.Shards[shard])
		for start := 0; start < len(strs); start += invalidateBatch {
			batch := strs[start:min(start+invalidateBatch, len(strs))]
			var err error
			if t.c.brk.allow() {
				err = t.c.invalidateRows(ctx, tk, batch)
			} else {
				err = t.unavailable(batch[0])
			}
			if err != nil {
				t.remember(err, batch...)
				errs = append(errs, writeOutcome(ctx, err))
				continue
			}
			t.pending.done(batch...)
			t.cs.sent.Add(1)
		}
	}
	for _, id := range ids {
		t.Forget(id)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cache: table %s: Invalidate: %w", t.spec.Name, err)
	}
	return nil
}

// InvalidateAll invalidates the whole table: every row is deleted from L2 (a SCAN step per
// script call, so a large table does not block the server), then a new epoch is published (per
// shard, on a sharded table), and every process flushes the table's L1 when it sees it. This
// process's L1 is flushed before it returns. Rows written while it runs may survive it. One
// that cannot reach Valkey is retried once Valkey answers again.
func (t *Table[K, V]) InvalidateAll(ctx context.Context) error {
	t.writeMu.RLock()
	defer t.writeMu.RUnlock()
	if t.c.isClosed() {
		return ErrClosed
	}
	var err error
	var reached flushPos
	owed := t.pending.generation()
	if t.c.brk.allow() {
		reached, err = t.flushShards(ctx, flushPos{})
	} else {
		err = t.unavailable("*")
	}
	t.flushL1()
	if err != nil {
		if errors.Is(err, ErrL2) && unreachable(err) {
			t.pending.resume(reached, nil)
		}
		return fmt.Errorf("cache: table %s: InvalidateAll: %w", t.spec.Name, writeOutcome(ctx, err))
	}
	t.pending.dropAt(owed) // the whole table was invalidated: nothing owed before it is left
	return nil
}

// writeOutcome is the error a write returns for err, from a script run under the caller's
// ctx: once ctx ended, its cancellation or deadline is the caller's, not an L2 failure. What
// the table remembers is decided on err as it came (the write may have landed before ctx
// ended).
func writeOutcome(ctx context.Context, err error) error {
	if ctx.Err() == nil {
		return err
	}
	return l2outcome(ctx, ctx, 0, err)
}

// flushShards runs cache_flush over the table's shards, one after the other, from where
// from says (the shard, and where its walk stands): each shard's rows are deleted and its
// epoch replaced, so every process flushes the table's L1. It stops at the first shard that
// fails and returns how far the walk got, for a retry to resume from there: on a large
// database a walk may not end within one reconcile, and one that began again each time
// would never end. (A walk resumed on another server process starts that shard again.)
func (t *Table[K, V]) flushShards(ctx context.Context, from flushPos) (flushPos, error) {
	for i := from.shard; i < len(t.decl.Shards); i++ {
		var at walkPos
		if i == from.shard {
			at = from.walk
		}
		reached, err := t.c.flushTable(ctx, coherenceKeys(t.decl.Shards[i]), at)
		if err != nil {
			return flushPos{shard: i, walk: reached}, err
		}
		t.cs.sent.Add(1)
	}
	return flushPos{}, nil
}

// byShard groups ids (in row-key form) by the shard that holds them, keeping their order:
// out[i] are shard i's. One shard, one group: the ids as given.
func (t *Table[K, V]) byShard(ids []string) [][]string {
	n := len(t.decl.Shards)
	if n <= 1 {
		return [][]string{ids}
	}
	out := make([][]string, n)
	for _, id := range ids {
		i := keys.ShardOf(id, n)
		out[i] = append(out[i], id)
	}
	return out
}

// coherenceKeys are the coherence record and invalidation channel of a table, or of one of
// its shards.
func coherenceKeys(k keys.Table) tableKeys {
	return tableKeys{recordKey: k.Record(), channel: k.Inval()}
}

// miss is Get past an L1 miss. A stale-on-error table with a value at hand (an L1 entry
// past its deadline but read from L2 at most StaleOnError ago) waits at most StaleTimeout
// for L2 and the loader, and answers the stale value when they fail; the entry is not used
// if it was invalidated meanwhile. A read that the stale timeout cut short and that has no
// stale value left to answer goes on as a Get without one: that timeout is the table's, not
// the caller's deadline, and the read still has degraded mode and the fill in flight.
func (t *Table[K, V]) miss(ctx context.Context, id K) (V, Tier, error) {
	if !t.spec.StaleEnabled() || t.l1 == nil {
		return t.get(ctx, id)
	}
	e, ok := t.l1.Get(id)
	if !ok || e.notFound || t.clk.precise()-e.fetched > int64(t.spec.StaleOnError) {
		return t.get(ctx, id)
	}
	// A StaleTimeout at least as long as L2Timeout gave L2 its full time: running out of it is
	// an L2 timeout, which the breaker counts. A shorter one is the table's wish for a quick
	// answer, not a sign that Valkey failed.
	newCtx := context.WithTimeout
	if t.spec.StaleTimeout >= t.spec.L2Timeout {
		newCtx = withTableDeadline
	}
	sctx, cancel := newCtx(ctx, t.spec.StaleTimeout)
	defer cancel()
	v, tier, err := t.get(sctx, id)
	if err == nil || errors.Is(err, ErrNotFound) || errors.Is(err, ErrClosed) || ctx.Err() != nil {
		return v, tier, err
	}
	if cur, ok := t.l1.Get(id); !ok || cur != e || t.clk.precise()-e.fetched > int64(t.spec.StaleOnError) {
		// Invalidated (or replaced) meanwhile, or too old by now.
		if sctx.Err() != nil {
			return t.get(ctx, id)
		}
		return v, tier, err
	}
	t.st.staleServed.Add(1)
	return e.value, TierStale, nil
}

// supersede is the last step of a versioned table's fill (or early refresh) whose row
// cache_fill refused because something replaced its lease. When that something is a versioned
// value of a lower version than vrow's (a Set of an older value, late, landed on the lease),
// the loaded value is the newer one and would otherwise be dropped, leaving the older value
// in L2 until its TTL: it is written as Set writes it (cache_set compares the versions again
// in the script, and the id is invalidated everywhere). Anything else stays as it is: no row
// (an invalidation deleted the lease, so the load may predate a commit), an unversioned row,
// or a version as high or higher. It reports whether vrow was written.
func (t *Table[K, V]) supersede(ctx context.Context, id K, idStr, key, vrow string, px time.Duration) bool {
	if t.version == nil || !t.c.brk.allow() {
		return false
	}
	val, exists, _, err := t.readRow(ctx, key, false)
	if err != nil || !exists {
		return false
	}
	cur, mine := parseRow(val), parseRow(vrow)
	if cur.kind != rowValue || !cur.versioned || cur.vversion >= mine.vversion {
		return false
	}
	t.writeMu.RLock()
	defer t.writeMu.RUnlock()
	written, err := t.c.setRow(ctx, coherenceKeys(t.decl.KeysFor(idStr)), t.c.writeToken(), idStr, vrow, px)
	if err != nil {
		t.c.log.Warn("cache: writing a filled value over an older version failed", "table", t.spec.Name, "id", idStr, "err", err)
		return false
	}
	if written {
		t.Forget(id)
	}
	return written
}
