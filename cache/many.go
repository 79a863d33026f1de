package cache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/echocache/echocache/keys"
)

// The keys package under other names: GetMany's locals are called keys.
var (
	keysValidateID = keys.ValidateID
	keysShardOf    = keys.ShardOf
)

// manyChunk is how many ids GetMany reads from L2 and loads at once. Each chunk's round trips
// are bounded by the table's L2Timeout, which a read of many more rows would outlast on a
// healthy server: a GetMany of 200,000 ids timed out its leases and put the table in
// degraded mode. It also bounds the ids a batch loader receives.
const manyChunk = 1000

// GetMany returns the values of ids, keyed by id; ids that do not exist are absent from the
// map. It reads L1 first, then the rest of the rows, 1,000 ids at a time: per chunk, one MGET
// (one per shard on a sharded table, pipelined; their PTTLs pipelined behind: one round trip;
// on a cluster, a read per row, split per node, since a migrating slot refuses a read of
// several keys when one is missing), then the leases of
// what is still missing in one pipeline (a row that does not decode is taken over with a call
// of its own), one batch-loader call (see [TableOpts].BatchLoad) and one pipeline that writes
// the outcome. Ids whose rows another filler holds are waited for as Get would. When L2 fails
// at the read or at the leases (or the breaker is open), degraded mode answers the ids still
// missing from the loader, as it answers Get. On error it returns what it has, with the
// errors of every chunk; it stops early only when ctx is done or the Cache closed.
func (t *Table[K, V]) GetMany(ctx context.Context, ids []K) (map[K]V, error) {
	out := make(map[K]V, len(ids))
	rest := make([]K, 0, len(ids))
	seen := make(map[K]struct{}, len(ids))
	for _, id := range ids {
		if _, dup := seen[id]; dup {
			continue
		}
		seen[id] = struct{}{}
		if e, ok := t.l1Lookup(id); ok {
			if !e.notFound {
				out[id] = e.value
			}
			continue
		}
		rest = append(rest, id)
	}
	if len(rest) > manyChunk {
		// Every id is checked before the first chunk takes leases and loads, as one chunk's
		// are: a bad id refuses the call with nothing written.
		var buf []byte
		for _, id := range rest {
			buf = t.ops.append(buf[:0], id)
			if err := keysValidateID(unsafe.String(unsafe.SliceData(buf), len(buf))); err != nil {
				return out, fmt.Errorf("cache: table %s: %w", t.spec.Name, err)
			}
		}
	}
	var errs []error
	for len(rest) > 0 {
		n := min(len(rest), manyChunk)
		err := t.getMissing(ctx, rest[:n], out)
		if err != nil {
			errs = append(errs, err)
			if errors.Is(err, ErrClosed) || ctx.Err() != nil {
				break
			}
		}
		rest = rest[n:]
	}
	return out, errors.Join(errs...)
}

// getMissing is GetMany for ids that L1 did not hold: it adds what it finds to out.
func (t *Table[K, V]) getMissing(ctx context.Context, rest []K, out map[K]V) error {
	if t.c.isClosed() {
		return ErrClosed
	}
	rk, err := t.rowKeys(rest)
	if err != nil {
		return fmt.Errorf("cache: table %s: %w", t.spec.Name, err)
	}
	idStrs, keys := rk.ids, rk.keys
	gens := make([]gen, len(rest))
	for i, id := range rest {
		gens[i] = t.gens.read(stripeOf(id, t.ops))
	}
	if t.pending.owing.Load() && t.spec.DegradedEnabled() {
		return t.degradedMany(ctx, rest, out, errOwing)
	}
	if !t.c.brk.allow() {
		if t.spec.DegradedEnabled() {
			return t.degradedMany(ctx, rest, out, ErrL2Unavailable)
		}
		return t.unavailable(idStrs[0])
	}
	sent := t.clk.precise()
	rows, err := t.readRows(ctx, keys, rk.groups, t.needTTL())
	if err != nil {
		if t.degrades(ctx, err) {
			return t.degradedMany(ctx, rest, out, err)
		}
		return err
	}
	var absent, unreadable, others []int
	vals := make([]V, len(rows)) // decoded in place: no allocation per row of ours
	for i, rr := range rows {
		if !rr.exists {
			absent = append(absent, i)
			continue
		}
		r := parseRow(rr.val)
		if err, done := t.fromRowInto(ctx, rest[i], keys[i], gens[i], r, rr.ttl, sent, &vals[i], true); done {
			if err == nil {
				out[rest[i]] = vals[i]
			}
			continue
		}
		if r.kind == rowLease {
			others = append(others, i)
		} else {
			unreadable = append(unreadable, i)
		}
	}
	var errs []error
	if len(absent)+len(unreadable) > 0 {
		raced, unleased, lerr, err := t.fillMany(ctx, rest, idStrs, keys, gens, rows, absent, unreadable, out)
		t.st.misses.Add(int64(len(absent) + len(unreadable) - len(raced)))
		others = append(others, raced...)
		if err != nil {
			errs = append(errs, err)
		}
		if len(unleased) > 0 && t.degrades(ctx, lerr) {
			// L2 failed the leases (or refuses writes): the loader answers those ids, as it
			// answers a Get whose fill fails on L2.
			missing := make([]K, len(unleased))
			for j, i := range unleased {
				missing[j] = rest[i]
			}
			lerr = t.degradedMany(ctx, missing, out, lerr)
		}
		if lerr != nil {
			errs = append(errs, lerr)
		}
	}
	// Rows another filler holds (or won a race for): wait for them as Get does, which counts
	// each as Get counts it (a miss, or an L2 hit when the row landed meanwhile). Their fills
	// run elsewhere concurrently, so waiting one after the other costs about the longest of
	// them.
	for _, i := range others {
		v, _, err := t.get(ctx, rest[i])
		switch {
		case err == nil:
			out[rest[i]] = v
		case !errors.Is(err, ErrNotFound):
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// outcome is one id's load result in a batch.
type outcome[V any] struct {
	v     V
	found bool
	err   error // a failure; not-found is found == false with err == nil
	delta time.Duration
}

// fillMany leases the absent and unreadable rows, loads the leased ids in one batch-loader
// call, and writes the outcomes in one pipeline, adding found values to out. It returns the
// indexes it could not lease because another filler was first (raced, to be waited for) or
// because L2 failed (unleased, with that failure in leaseErr), and the errors of the fill of
// the rest in err.
func (t *Table[K, V]) fillMany(callerCtx context.Context, rest []K, idStrs, keys []string, gens []gen,
	rows []rowRead, absent, unreadable []int, out map[K]V) (raced, unleased []int, leaseErr, err error) {
	if !t.c.enter() {
		return nil, nil, nil, ErrClosed
	}
	defer t.c.leave()
	// Leases are held for every process: once taken, the fill finishes whatever the caller does.
	ctx, cancel := t.c.detach(callerCtx, t.spec.LeaseTTL())
	defer cancel()
	token := newToken()
	held := make([]int, 0, len(absent)+len(unreadable))

	absentKeys := make([]string, len(absent))
	for j, i := range absent {
		absentKeys[j] = keys[i]
	}
	acquired, lerr := t.leaseMany(ctx, absentKeys, token, t.spec.LeaseTTL())
	var lost []string // leases that may have landed before their replies were lost (see get)
	for j, i := range absent {
		switch {
		case acquired[j]:
			held = append(held, i)
		case lerr == nil:
			raced = append(raced, i)
		default:
			lost = append(lost, keys[i])
			unleased = append(unleased, i)
		}
	}
	for _, i := range unreadable {
		t.st.corrupt.Add(1)
		ok, err := t.reclaim(ctx, keys[i], rows[i].val, token, t.spec.LeaseTTL())
		switch {
		case err != nil:
			if unreachable(err) {
				lost = append(lost, keys[i])
			}
			unleased = append(unleased, i)
			lerr = errors.Join(lerr, err)
		case ok:
			held = append(held, i)
		default:
			raced = append(raced, i)
		}
	}
	if lerr != nil {
		t.releaseLater(token, lost...)
		lerr = fmt.Errorf("cache: table %s: taking fill leases: %w", t.spec.Name, lerr)
	}
	if len(held) == 0 {
		return raced, unleased, lerr, nil
	}

	results := t.loadMany(ctx, rest, idStrs, held)

	// One pipelined write: each id's value row, not-found row, or lease release.
	wkeys, wrows := make([]string, len(held)), make([]string, len(held))
	pxs := make([]time.Duration, len(held))
	var errs []error
	for j, i := range held {
		wkeys[j] = keys[i]
		res := &results[j]
		switch {
		case res.err != nil:
			errs = append(errs, res.err)
		case res.found:
			pxs[j] = t.jitter(t.spec.TTL)
			vrow, err := t.valueRowOf(res.v, idStrs[i], token, res.delta, pxs[j])
			if err != nil {
				res.err = err // the empty row below releases the lease
				errs = append(errs, res.err)
				continue
			}
			wrows[j] = vrow
		case t.spec.NegativeEnabled():
			wrows[j], pxs[j] = notFoundRow(res.delta), t.jitter(t.spec.NegativeTTL)
		}
	}
	wsent := t.clk.precise()
	written, werrs := t.finishMany(ctx, wkeys, token, wrows, pxs)
	for j, i := range held {
		res := &results[j]
		if werrs[j] != nil {
			// The row (or the release) was not written: the lease is given back as Get's fill
			// gives it back, at once or, when the server could not be reached, later; left,
			// it would hold every other process's read of the id for the lease's lifetime.
			t.giveBack(ctx, wkeys[j], token, werrs[j])
		}
		if res.err != nil {
			continue
		}
		if res.found {
			out[rest[i]] = res.v
		}
		switch {
		case werrs[j] != nil:
			t.c.log.Warn("cache: writing a filled row failed", "table", t.spec.Name, "id", idStrs[i], "err", werrs[j])
		case wrows[j] == "": // a not-found with negative caching off: the lease was released
		case !written[j] && !t.supersede(ctx, rest[i], idStrs[i], wkeys[j], wrows[j], pxs[j]):
			t.st.fillsRefused.Add(1)
		case !written[j]: // written over an older version, as Set writes
		default:
			t.install(rest[i], gens[i], t.newEntry(res.v, !res.found, wsent, pttl(pxMillis(pxs[j])), res.delta, token))
		}
	}
	return raced, unleased, lerr, errors.Join(errs...)
}

// loadMany loads the held ids: with one batch-loader call when the table has one, else with
// the per-id loader, DefaultLoadConcurrency at a time.
func (t *Table[K, V]) loadMany(ctx context.Context, rest []K, idStrs []string, held []int) []outcome[V] {
	results := make([]outcome[V], len(held))
	if t.batch != nil {
		ids := make([]K, len(held))
		for j, i := range held {
			ids[j] = rest[i]
		}
		lctx, cancel := context.WithTimeout(ctx, t.spec.LoaderTimeout)
		defer cancel()
		start := t.clk.precise()
		got, err := protect("batch loader of table "+t.spec.Name, func() (map[K]V, error) { return t.batch(lctx, ids) })
		delta := time.Duration(t.clk.precise() - start)
		t.countLoad(delta, err)
		if err != nil {
			err = &LoadError{Table: t.spec.Name, ID: idStrs[held[0]], Batch: len(held),
				Timeout: errors.Is(lctx.Err(), context.DeadlineExceeded), Err: err}
		}
		for j, id := range ids {
			results[j].delta = delta
			if err != nil {
				results[j].err = err
				continue
			}
			results[j].v, results[j].found = got[id]
		}
		return results
	}
	sem := make(chan struct{}, DefaultLoadConcurrency)
	var wg sync.WaitGroup
	for j, i := range held {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			v, delta, err := t.callLoader(ctx, rest[i], idStrs[i])
			results[j] = outcome[V]{v: v, found: err == nil, delta: delta}
			if err != nil && !errors.Is(err, ErrNotFound) {
				results[j].err = err
			}
		})
	}
	wg.Wait()
	return results
}

// rowKeysOf are the row keys of a batch of ids and their row-key forms, built in one buffer:
// no allocation per id. groups are the indexes of each shard's ids, nil for a table of one
// shard.
type rowKeysOf struct {
	keys, ids []string
	groups    [][]int
}

// rowKeys builds the row keys of ids (validated as Row would).
func (t *Table[K, V]) rowKeys(ids []K) (rowKeysOf, error) {
	n := len(ids)
	rk := rowKeysOf{keys: make([]string, n), ids: make([]string, n)}
	shards := t.decl.Shards
	size := 0
	for _, sh := range shards {
		size = max(size, len(sh.RowPrefix()))
	}
	buf := make([]byte, 0, n*(size+20))
	var ns int
	if len(shards) > 1 {
		ns = len(shards)
		rk.groups = make([][]int, ns)
	}
	for i, id := range ids {
		// The id is appended first, to learn its shard, then the key is the shard's prefix
		// and the id again; strings over the buffer stay valid however it grows, since
		// append never writes over bytes already handed out.
		start := len(buf)
		buf = t.ops.append(buf, id)
		idStr := unsafe.String(unsafe.SliceData(buf[start:]), len(buf)-start)
		if err := keysValidateID(idStr); err != nil {
			return rk, err
		}
		shard := 0
		if ns > 0 {
			shard = keysShardOf(idStr, ns)
			rk.groups[shard] = append(rk.groups[shard], i)
		}
		kstart := len(buf)
		buf = append(buf, shards[shard].RowPrefix()...)
		buf = append(buf, idStr...)
		rk.keys[i] = unsafe.String(unsafe.SliceData(buf[kstart:]), len(buf)-kstart)
		rk.ids[i] = idStr
	}
	return rk, nil
}
