package cache

import "time"

// Hooks into the package's internals, for its tests only.

// SetHookAfterRead makes every fill call f after each L2 read it acts on (the read of the
// miss that started it, a lease reply, its own reads), before it acts on it.
func (t *Table[K, V]) SetHookAfterRead(f func(id string)) { t.hookAfterRead = f }

// SetHookJoined makes every caller that joins (or starts) a fill call f.
func (t *Table[K, V]) SetHookJoined(f func(id string)) { t.hookJoined = f }

// SetHookLeased sets a hook called after a read took the fill lease, before it offers it.
func (t *Table[K, V]) SetHookLeased(f func(id string)) { t.hookLeased = f }

// XFetch exposes the early-refresh test.
var XFetch = xfetch

// XFetchSpan exposes where the early-refresh window opens, in units of delta*beta.
const XFetchSpan = xfetchSpan

// Row formats, for tests that plant rows.
var (
	ValueRow    = valueRow
	NotFoundRow = notFoundRow
	LeaseRow    = leaseRow
)

// ParsedKind reads a row as the cache does and names its kind.
func ParsedKind(s string) string {
	return [...]string{"absent", "value", "notfound", "lease", "corrupt"}[parseRow(s).kind]
}

// ParsedVersion is a value row's version, and whether the row is claimed for a refresh.
func ParsedVersion(s string) (version string, claimed bool) {
	r := parseRow(s)
	return r.version, r.kind == rowValue && r.token != ""
}

// ParsedPayload is the payload a value row carries.
func ParsedPayload(s string) string { return parseRow(s).payload }

// FormatID and ParseID expose the id conversions of a table's key type.
func FormatID[K ID](id K) string                        { return opsFor[K]().format(id) }
func ParseID[K ID](s string) (K, error)                 { return opsFor[K]().parse(s) }
func HashID[K ID](id K) (uint64, uint64)                { return opsFor[K]().hash(id) }
func DropIDs[K ID, V any](t *Table[K, V], ids []string) { t.dropIDs(ids) }

// SetHookBeforeInstall makes every L1 install call f first: after the L2 reply (or the
// load) that produced the value, before the generation check.
func (t *Table[K, V]) SetHookBeforeInstall(f func(id string)) { t.hookBeforeInstall = f }

// SetHookMessage makes the subscriber call f with every invalidation message before it
// applies it; f returning false drops the message (a lost invalidation). Set it before the
// first table is declared.
func (c *Cache) SetHookMessage(f func(table string, payload []byte) bool) { c.coh.hookMessage = f }

// SetHookDropped makes the subscriber call f after it applied a message's ids.
func (c *Cache) SetHookDropped(f func(table string, ids []string)) { c.coh.hookDropped = f }

// Synced reports whether the table's invalidation subscription is confirmed.
func (t *Table[K, V]) Synced() bool { return t.cs.synced() }

// PeekL1 returns id's L1 entry, expired or not, without counting a hit.
func PeekL1[K ID, V any](t *Table[K, V], id K) (V, bool) {
	var zero V
	if t.l1 == nil {
		return zero, false
	}
	e, ok := t.l1.Get(id)
	if !ok || e.notFound {
		return zero, false
	}
	return e.value, true
}

// VersionedRow builds a versioned value row, for tests that plant rows.
var VersionedRow = versionedRow

// ParsedValueVersion is a versioned value row's value version, and whether the row is one.
func ParsedValueVersion(s string) (uint64, bool) {
	r := parseRow(s)
	return r.vversion, r.kind == rowValue && r.versioned
}

// Kick asks the background loop to reconcile this table (alone) now, as a resubscribe of its
// channel or a regression seen in a message does.
func (t *Table[K, V]) Kick() {
	co := t.c.coh
	co.mu.Lock()
	for _, ts := range t.cs.shards {
		co.pending[ts] = true
	}
	co.mu.Unlock()
	co.wake()
}

// SetFlushCount sets cache_flush's SCAN COUNT per call (1000 otherwise).
func (c *Cache) SetFlushCount(n int) { c.flushCount = n }

// SetHookFlushStep makes every cache_flush call of a whole-table invalidation run f first;
// an error from f fails that call as an L2 error would.
func (c *Cache) SetHookFlushStep(f func() error) { c.hookFlushStep = f }

// OweAll makes the table owe a whole-table invalidation, as an overflow of its pending ids or
// a record gone back in time does.
func (t *Table[K, V]) OweAll() { t.oweAll() }

// SetRelistEvery sets how long c trusts that a table it listed is still in the registry.
func SetRelistEvery(c *Cache, d time.Duration) { c.pub.relist.Store(int64(d)) }
