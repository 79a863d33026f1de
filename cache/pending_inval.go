package cache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// Writes during an outage. A Set, Invalidate or InvalidateAll that cannot reach Valkey
// returns its error, and the table also remembers what it meant to invalidate: the caller
// may already have committed to the database, and other processes must not keep a value the
// database no longer has. The ids are retried (cache_invalidate, which also deletes the
// rows) by the first reconcile that finds Valkey answering. At most MaxPendingInvalidations
// ids are remembered per table; past that the table owes a whole-table invalidation
// (InvalidateAll) instead, which covers every id. A table whose record went back in time
// owes one too (see sequence.go), sent the same way. An owed whole-table invalidation that
// fails part way is resumed where it stopped (flushPos), and the ids whose writes fail
// meanwhile are remembered beside it: the part of the walk already done may have passed
// their rows.

// pendingInvals are a table's invalidations that did not reach Valkey.
type pendingInvals struct {
	mu   sync.Mutex
	max  int
	ids  map[string]struct{}
	all  bool     // overflowed, or an InvalidateAll failed: a whole-table invalidation is owed
	from flushPos // with all: where its walk resumes
	// inflight is what a retry took and has not settled (-1: a whole-table invalidation), so
	// that count still reports it while it is being sent.
	inflight int
	// gen grows whenever something comes to be owed, so that an InvalidateAll drops only
	// what was owed before its walk began (dropAt).
	gen uint64
	// owing is whether anything is owed or being sent (count != 0), for the read path to
	// test without the lock: a table that owes reads no L2 row (see Table.get).
	owing atomic.Bool
}

// note updates owing. Called with mu held.
func (p *pendingInvals) note() {
	p.owing.Store(p.all || p.inflight != 0 || len(p.ids) > 0)
}

// flushPos is how far a whole-table invalidation got: the shard it was walking and where its
// walk stands. The zero flushPos is the table's start.
type flushPos struct {
	shard int
	walk  walkPos
}

func (f flushPos) start() bool {
	return f.shard == 0 && (f.walk.cursor == "" || f.walk.cursor == "0")
}

// add remembers ids; past max it owes a whole-table invalidation from the start instead.
// While a whole-table invalidation is owed from its start, it covers them.
func (p *pendingInvals) add(ids ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.note()
	p.addLocked(ids)
}

func (p *pendingInvals) addLocked(ids []string) {
	if len(ids) == 0 || p.all && p.from.start() {
		return
	}
	p.gen++
	if p.ids == nil {
		p.ids = make(map[string]struct{})
	}
	for _, id := range ids {
		if _, owed := p.ids[id]; owed {
			continue // owed once, however often it failed: the bound counts distinct ids
		}
		if len(p.ids) >= p.max {
			p.all, p.ids, p.from = true, nil, flushPos{}
			return
		}
		p.ids[id] = struct{}{}
	}
}

// done forgets ids whose invalidation reached Valkey since (a later Set or Invalidate of
// them): its message told every process, so retrying would only delete a good row.
func (p *pendingInvals) done(ids ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.note()
	for _, id := range ids {
		delete(p.ids, id)
	}
}

// addAll owes a whole-table invalidation, from the start.
func (p *pendingInvals) addAll() {
	p.mu.Lock()
	p.all, p.ids, p.from = true, nil, flushPos{}
	p.gen++
	p.note()
	p.mu.Unlock()
}

// resume owes a whole-table invalidation whose walk reached from (one owed from the start
// meanwhile stays so), and remembers ids beside it; it settles the retry that took them.
func (p *pendingInvals) resume(from flushPos, ids []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.note()
	if !p.all || !p.from.start() {
		p.all, p.from = true, from
	}
	p.gen++
	p.inflight = 0
	p.addLocked(ids)
}

// take hands the pending work to one retry: the ids, and whether a whole-table invalidation
// is owed and from where.
func (p *pendingInvals) take() (ids []string, all bool, from flushPos) {
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.note()
	for id := range p.ids {
		ids = append(ids, id)
	}
	all, from, p.ids, p.all, p.from = p.all, p.from, nil, false, flushPos{}
	p.inflight = len(ids)
	if all {
		p.inflight = -1
	}
	return ids, all, from
}

// settle ends the retry that took the pending work, giving back the ids it could not send.
func (p *pendingInvals) settle(back ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.note()
	p.inflight = 0
	p.addLocked(back)
}

// generation is where the pending work stands, for dropAt.
func (p *pendingInvals) generation() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gen
}

// dropAt forgets everything pending, unless something came to be owed since generation g:
// a whole-table invalidation that began at g reached Valkey, and it covers only what was
// owed before it began (a write that failed while its walk ran may have been passed by it).
func (p *pendingInvals) dropAt(g uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.note()
	if p.gen == g {
		p.ids, p.all, p.from = nil, false, flushPos{}
	}
}

// count is how many ids are pending, those a retry is sending included (-1: a whole-table
// invalidation is owed).
func (p *pendingInvals) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.all || p.inflight < 0 {
		return -1
	}
	return len(p.ids) + p.inflight
}

// remember keeps what a failed write meant to invalidate, if its error says Valkey could
// not be reached (an error reply to the script would only fail again).
func (t *Table[K, V]) remember(err error, ids ...string) {
	if errors.Is(err, ErrL2) && unreachable(err) {
		t.pending.add(ids...)
	}
}

// retryPending sends the table's pending invalidations; what fails stays pending. The
// reconcile calls it once Valkey answers. It holds the table's writes off meanwhile: a Set
// that succeeded after the ids were taken must land after their retried invalidation, not
// be deleted by it.
func (t *Table[K, V]) retryPending(ctx context.Context) error {
	t.writeMu.Lock()
	defer t.writeMu.Unlock()
	ids, all, from := t.pending.take()
	if all {
		reached, err := t.flushShards(ctx, from)
		if err != nil {
			t.pending.resume(reached, ids)
			return fmt.Errorf("cache: table %s: retrying a whole-table invalidation: %w", t.spec.Name, err)
		}
		t.c.log.Info("cache: a whole-table invalidation owed (since an outage, or a record that went back in time) was sent", "table", t.spec.Name)
		// ids are those whose writes failed while the walk was under way: it may have passed
		// their rows before they were written again.
	}
	groups := t.byShard(ids)
	for shard, strs := range groups {
		tk := coherenceKeys(t.decl.Shards[shard])
		for start := 0; start < len(strs); start += invalidateBatch {
			batch := strs[start:min(start+invalidateBatch, len(strs))]
			if err := t.c.invalidateRows(ctx, tk, batch); err != nil {
				left := strs[start:]
				for _, rest := range groups[shard+1:] {
					left = append(left, rest...)
				}
				t.pending.settle(left...)
				return fmt.Errorf("cache: table %s: retrying %d invalidations: %w", t.spec.Name, len(left), err)
			}
			t.cs.sent.Add(1)
			// The message carries this process's own token, which the subscription skips
			// (a writer drops its ids itself): so does the retry, for the copies L1 took of
			// the rows meanwhile (reads of an owing table go to L2 when degraded mode is off).
			t.dropIDs(batch)
		}
	}
	t.pending.settle()
	if len(ids) > 0 {
		t.c.log.Info("cache: invalidations refused during an outage were sent", "table", t.spec.Name, "ids", len(ids))
	}
	return nil
}

// pendingCount is retryPending's backlog for the reconcile: 0 means nothing to send.
func (t *Table[K, V]) pendingCount() int { return t.pending.count() }

func (t *Table[K, V]) oweAll() { t.pending.addAll() }
