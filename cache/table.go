package cache

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/dgraph-io/ristretto/v2"
	"golang.org/x/sync/singleflight"

	"github.com/echocache/echocache/tables"
)

// Loader loads one id from the source of truth. It returns ErrNotFound (or an error wrapping
// it) for an id that does not exist; the table then remembers the absence for its
// NegativeTTL. Its context carries the first caller's values but not its cancellation, and
// ends after the table's LoaderTimeout.
type Loader[K ID, V any] func(ctx context.Context, id K) (V, error)

// BatchLoader loads many ids in one call, for [Table.GetMany], at most 1,000 of them. Ids
// missing from the returned map do not exist (they are remembered like ErrNotFound). An error
// fails the whole batch.
type BatchLoader[K ID, V any] func(ctx context.Context, ids []K) (map[K]V, error)

// TableOpts are a table's optional parts; a nil *TableOpts means all defaults.
type TableOpts[K ID, V any] struct {
	// BatchLoad serves GetMany's misses in one call per 1,000 ids. Default: GetMany calls the table's
	// Loader for each missing id, up to DefaultLoadConcurrency at a time.
	BatchLoad BatchLoader[K, V]
	// Codec encodes values for L2. Default: JSON[V]; Msgpack[V] makes smaller rows and
	// allocates less per decode.
	Codec Codec[V]
	// CompressAbove compresses payloads of at least this many bytes (as the codec wrote
	// them) with DEFLATE (compress/flate, BestSpeed) before they go to L2, and inflates them
	// on reads: for large values, where bytes on the wire and in Valkey's memory cost more
	// than the CPU. Every payload of such a table opens with one byte telling plain from
	// compressed, so turning it on (or off) for a table makes its existing rows unreadable:
	// they are counted in Stats.CorruptRows and refilled. A payload inflates to
	// [MaxInflatedPayload] at most: one the codec wrote longer is stored plain, and a row
	// that inflates past it is corrupt. Default 0: off (payloads are the codec's bytes as they
	// are).
	CompressAbove int
	// Version makes the table's writes versioned: it reads a value's version, a number that
	// grows with every change of the value in the source of truth (a revision, an updated_at
	// in ms or µs). Set and fills then write versioned rows, and a Set whose value is older
	// than the row in L2 is refused in the script that would write it (see [Table.Set]), so
	// writers that commit A then B but reach Set in the order B, A leave B. It must be
	// cheap, and pure: called on every write and every fill. Default: nil, unversioned (the
	// last Set wins).
	Version func(V) uint64
}

// DefaultLoadConcurrency is how many loader calls GetMany runs at once for a table without
// a batch loader.
const DefaultLoadConcurrency = 8

// Table is a typed cache table: ids of type K, values of type V. Get reads L1, then the L2
// row, then the loader; GetMany does the same for many ids with one MGET and one batch-loader
// call. Make tables with [NewTable]. A Table is safe for concurrent use.
type Table[K ID, V any] struct {
	// The L1 hit path reads only these fields and the entry. The pad keeps the hit
	// counter's writes off the cache line that every core reads l1 and clk from.
	l1   *ristretto.Cache[K, *entry[V]] // nil when the spec disables L1
	clk  *clock
	_    [128]byte
	hits counter

	c     *Cache
	decl  tables.Table
	spec  tables.Spec
	ops   idOps[K]
	load  Loader[K, V]
	batch BatchLoader[K, V]
	codec Codec[V]
	// version reads a value's version (TableOpts.Version); nil for an unversioned table.
	version func(V) uint64

	sf  singleflight.Group // fills, keyed by id and generation (flightKey)
	dsf singleflight.Group // degraded loads, keyed by id and generation (flightKey)
	// degradedSlots bounds the degraded loads running at once (DegradedLoads).
	degradedSlots chan struct{}
	gens          generations
	st            tableStats

	refreshMu  sync.Mutex
	refreshing map[string]int64 // id -> do not start another refresh before this time

	// leases taken by reads of this process and not yet loaded under, by id: the fill of
	// the id takes one over when it meets it (see fill.go). An id may have more than one:
	// between two reads' SET NX another process's invalidation may delete the first lease,
	// and the replies may come back in either order.
	leaseMu sync.Mutex
	leases  map[string][]string

	l1Mu sync.Mutex // serializes flushes

	cs *tableGroup // coherence, per shard: set once at declaration

	pending pendingInvals // invalidations that did not reach Valkey, sent when it answers
	writeMu sync.RWMutex  // writes share it; a retry of pending invalidations holds it alone

	// hooks for tests; nil in production.
	hookAfterRead     func(id string) // after each L2 read a fill acts on (the miss's, a lease reply, its own), before it acts
	hookJoined        func(id string) // after a caller joined (or started) a fill
	hookBeforeInstall func(id string) // after an L2 reply (or a load), before the L1 install
	hookLeased        func(id string) // after a read took the fill lease, before it offers it
}

// entry is what L1 holds for one id: the decoded value (or a remembered not-found) and the
// deadlines the hit path checks. Times are clock nanoseconds.
type entry[V any] struct {
	value    V
	notFound bool
	// check is the coarse-clock time before which a hit needs no precise clock: the earlier
	// of expires and refreshFrom, minus clockGuard.
	check int64
	// expires is the L1 deadline: min(L1TTL, the row's remaining PTTL), counted from before
	// the read (or write) that produced the entry, so L1 never outlives the row.
	expires int64
	// rowExpires is when the L2 row expires (math.MaxInt64 for a row without a TTL).
	rowExpires int64
	// refreshFrom opens the early-refresh window; math.MaxInt64 when early refresh is off.
	refreshFrom int64
	// deltaBeta is XFetch's delta*beta in nanoseconds.
	deltaBeta float64
	// version is the row version the entry was copied from: what an early refresh claims.
	version string
	// refreshTried keeps a hot entry from starting more than one refresh.
	refreshTried atomic.Bool
	// fetched is when the value was read from L2 (or loaded): what stale-on-error bounds.
	fetched int64
}

// NewTable declares spec on c and returns its typed handle. load is required; opts may be
// nil. A spec that does not validate, or whose name c already declared, is an error (see
// [tables.Registry.Declare]).
func NewTable[K ID, V any](c *Cache, spec tables.Spec, load Loader[K, V], opts *TableOpts[K, V]) (*Table[K, V], error) {
	if c == nil {
		return nil, fmt.Errorf("%w: NewTable: nil *Cache", ErrInvalid)
	}
	if load == nil {
		return nil, fmt.Errorf("%w: NewTable %s: nil loader", ErrInvalid, spec.Name)
	}
	t := &Table[K, V]{
		clk:        c.clk,
		c:          c,
		ops:        opsFor[K](),
		load:       load,
		codec:      JSON[V]{},
		refreshing: make(map[string]int64),
		leases:     make(map[string][]string),
	}
	if opts != nil {
		t.batch = opts.BatchLoad
		if opts.Codec != nil {
			t.codec = opts.Codec
		}
		switch {
		case opts.CompressAbove < 0:
			return nil, fmt.Errorf("%w: NewTable %s: TableOpts.CompressAbove is %d; a size in bytes, or 0 for off", ErrInvalid, spec.Name, opts.CompressAbove)
		case opts.CompressAbove > 0:
			t.codec = compressed[V]{inner: t.codec, above: opts.CompressAbove}
		}
		t.version = opts.Version
	}
	_, err := c.register(spec, func(decl tables.Table) (tableCore, error) {
		t.decl, t.spec = decl, decl.Spec
		t.degradedSlots = make(chan struct{}, max(t.spec.DegradedLoads, 0))
		t.pending.max = t.spec.MaxPendingInvalidations
		if t.spec.L1Enabled() {
			// ristretto allocates its counters up front; a count past what Go can allocate
			// panics (makeslice), which must come back as NewTable's error.
			l1, err := protect("L1 of table "+t.spec.Name, func() (*ristretto.Cache[K, *entry[V]], error) {
				return ristretto.NewCache(&ristretto.Config[K, *entry[V]]{
					NumCounters:        tables.L1CountersPerEntry * t.spec.L1MaxEntries, // bounded by tables.MaxL1MaxEntries
					MaxCost:            t.spec.L1MaxEntries,                             // every entry costs 1
					BufferItems:        64,
					IgnoreInternalCost: true,
					KeyToHash:          t.ops.hash,
				})
			})
			if err != nil {
				return nil, fmt.Errorf("L1 of L1MaxEntries %d: %w", t.spec.L1MaxEntries, err)
			}
			t.l1 = l1
		}
		return t, nil
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// MustTable is [NewTable] that panics on error, for tables declared once at start-up.
func MustTable[K ID, V any](c *Cache, spec tables.Spec, load Loader[K, V], opts *TableOpts[K, V]) *Table[K, V] {
	t, err := NewTable(c, spec, load, opts)
	if err != nil {
		panic(err)
	}
	return t
}

// Name is the table's name.
func (t *Table[K, V]) Name() string { return t.spec.Name }

// Spec is the table's resolved declaration (defaults filled in).
func (t *Table[K, V]) Spec() tables.Spec { return t.spec }

// Get returns the value of id: from L1 when it holds one (no allocation, no decoding), else
// from the L2 row, else from the loader, filled once however many goroutines and processes
// ask at the same moment. It returns ErrNotFound for an id the loader reported missing (and
// keeps answering so, without the loader, for the table's NegativeTTL). ctx bounds this
// caller's wait only: a fill it started goes on for the others.
func (t *Table[K, V]) Get(ctx context.Context, id K) (V, error) {
	// The hit path is spelled out here rather than shared with Lookup through hit: on a
	// path this short, the call and its extra result are a visible share of the cost
	// (BenchmarkL1Hit tracks it).
	if t.l1 != nil {
		if e, ok := t.l1.Get(id); ok {
			if t.clk.now() < e.check || t.nearDeadline(id, e) {
				if t.hits.incr(1)&(clockEvery-1) == 0 {
					t.clk.advance()
				}
				if e.notFound {
					var zero V
					return zero, ErrNotFound
				}
				return e.value, nil
			}
		}
	}
	v, _, err := t.miss(ctx, id)
	return v, err
}

// Lookup is [Table.Get] that also tells which tier answered: for per-tier latency and hit
// ratios in the caller's own metrics.
func (t *Table[K, V]) Lookup(ctx context.Context, id K) (V, Tier, error) {
	if v, err, ok := t.hit(id); ok {
		return v, TierL1, err
	}
	return t.miss(ctx, id)
}

// hit is Lookup's L1 hit path (Get's, written out there): ok reports a hit (of a value, or of a
// remembered not-found, then err is ErrNotFound).
func (t *Table[K, V]) hit(id K) (v V, err error, ok bool) {
	if t.l1 == nil {
		return v, nil, false
	}
	e, found := t.l1.Get(id)
	if !found || t.clk.now() >= e.check && !t.nearDeadline(id, e) {
		return v, nil, false
	}
	if t.hits.incr(1)&(clockEvery-1) == 0 {
		t.clk.advance()
	}
	if e.notFound {
		return v, ErrNotFound, true
	}
	return e.value, nil, true
}

// nearDeadline decides a hit on an entry close to one of its deadlines, with the precise
// clock: false once it has expired; otherwise true, after maybe starting an early refresh.
//
//go:noinline
func (t *Table[K, V]) nearDeadline(id K, e *entry[V]) bool {
	now := t.clk.precise()
	if now >= e.expires {
		return false
	}
	if now >= e.refreshFrom && xfetch(e.rowExpires-now, e.deltaBeta, randFloat()) &&
		e.refreshTried.CompareAndSwap(false, true) {
		t.startRefresh(id, e.rowExpires, e.version)
	}
	return true
}

// l1Lookup is the hit check of GetMany: the precise clock, no counters touched but hits.
func (t *Table[K, V]) l1Lookup(id K) (*entry[V], bool) {
	if t.l1 == nil {
		return nil, false
	}
	e, ok := t.l1.Get(id)
	if !ok || !t.nearDeadline(id, e) {
		return nil, false
	}
	t.hits.incr(1)
	return e, true
}

// get is the miss path of Get: read the L2 row, install what it holds, or go to a fill
// that acts on the same read.
func (t *Table[K, V]) get(ctx context.Context, id K) (V, Tier, error) {
	var zero V
	idStr := t.ops.format(id)
	key, err := t.decl.KeysFor(idStr).Row(idStr)
	if err != nil {
		return zero, TierNone, fmt.Errorf("cache: table %s: %w", t.spec.Name, err)
	}
	if t.c.isClosed() {
		return zero, TierNone, ErrClosed
	}
	if t.pending.owing.Load() && t.spec.DegradedEnabled() {
		return t.degradedGet(ctx, id, idStr, errOwing)
	}
	if !t.c.brk.allow() {
		if t.spec.DegradedEnabled() {
			return t.degradedGet(ctx, id, idStr, ErrL2Unavailable)
		}
		return zero, TierNone, t.unavailable(idStr)
	}
	g := t.gens.read(stripeOf(id, t.ops))
	sent := t.clk.precise()
	// The read takes the fill lease where no row is (SET NX GET): a cold miss reads and
	// leases in one round trip; a row that is there is read as by GET, and nothing written.
	token := newToken()
	val, exists, acquired, ttl, err := t.readOrLease(ctx, key, token, t.needTTL())
	if err != nil {
		if unreachable(err) {
			// The read may have taken the lease before its reply was lost: give it back once
			// Valkey answers, so no process waits it out.
			t.releaseLater(token, key)
		}
		if t.degrades(ctx, err) {
			return t.degradedGet(ctx, id, idStr, err)
		}
		return zero, TierNone, err
	}
	if exists {
		var v V
		if err, done := t.fromRowInto(ctx, id, key, g, parseRow(val), ttl, sent, &v, true); done {
			return v, TierL2, err
		}
	}
	// The fill starts from this read (the lease it took, another filler's lease, bytes to
	// reclaim): g was read before it, so an invalidation since then refuses the fill's
	// install as it would this one's.
	rd := fillRead{rowRead: rowRead{val: val, exists: exists, ttl: ttl}, g: g, readAt: sent}
	if acquired {
		if t.hookLeased != nil {
			t.hookLeased(idStr)
		}
		rd.leased = token
		t.offer(idStr, token)
	}
	v, err := t.fill(ctx, id, idStr, key, rd)
	if err != nil && t.degrades(ctx, err) {
		return t.degradedGet(ctx, id, idStr, err)
	}
	return v, TierFill, err
}

// needTTL says whether reads need the row's PTTL: for L1's deadline. A table without L1
// reads rows with a bare GET and asks for the PTTL only when the row's expiry hint says it
// may be in its early-refresh window (see maybeRefreshFromRow).
func (t *Table[K, V]) needTTL() bool { return t.spec.L1Enabled() }

// fromRow answers a fill from the row at key, read at sent (the time before the request): a
// value or a not-found is installed in L1 (through install) and returned with done set.
// Anything else (no row, a lease, bytes that do not decode) is left to the fill, done unset.
// It counts no L2 hit: the reads a fill answers were counted as misses when they joined it.
func (t *Table[K, V]) fromRow(ctx context.Context, id K, key string, g gen, r row, ttl pttl, sent int64) (v V, err error, done bool) {
	err, done = t.fromRowInto(ctx, id, key, g, r, ttl, sent, &v, false)
	return v, err, done
}

// fromRowInto is fromRow decoding into *dst, so that a batch decodes into one slice with no
// allocation of its own per row; hit counts an answer as an L2 hit (a read's own row, not
// one a fill waited for).
func (t *Table[K, V]) fromRowInto(ctx context.Context, id K, key string, g gen, r row, ttl pttl, sent int64, dst *V, hit bool) (err error, done bool) {
	switch r.kind {
	case rowValue:
		if err := decode(t.codec, r.payload, dst); err != nil {
			return nil, false // the fill counts it as corrupt and replaces it
		}
		if hit {
			t.st.l2Hits.Add(1)
		}
		if ttl != pttlGone && ttl != pttlUnread {
			t.install(id, g, t.newEntry(*dst, false, sent, ttl, r.delta, r.version))
		}
		t.maybeRefreshFromRow(ctx, id, key, r, ttl, sent)
		return nil, true
	case rowNotFound:
		if hit {
			t.st.l2Hits.Add(1)
		}
		if ttl != pttlGone && ttl != pttlUnread {
			var zero V
			t.install(id, g, t.newEntry(zero, true, sent, ttl, r.delta, ""))
		}
		return ErrNotFound, true
	}
	return nil, false
}
