package tables

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/echocache/echocache/keys"
)

// Off switches a feature off where a zero field would mean "the default": set Jitter,
// L1TTL, NegativeTTL or EarlyRefreshBeta to Off. It is an untyped constant, so it fits both
// the time.Duration and the float64 fields.
const Off = -1

// The defaults a zero [Spec] field stands for.
const (
	DefaultTTL              = 5 * time.Minute
	DefaultJitter           = 0.1
	DefaultL1TTL            = time.Minute
	DefaultNegativeTTL      = 30 * time.Second
	DefaultL1MaxEntries     = 10_000
	DefaultLoaderTimeout    = 5 * time.Second
	DefaultEarlyRefreshBeta = 1.0
	DefaultStaleTimeout     = 250 * time.Millisecond
	DefaultL2Timeout        = 250 * time.Millisecond
	DefaultDegradedLoads    = 4
	DefaultDegradedL1TTL    = time.Second

	DefaultMaxPendingInvalidations = 10_000
	DefaultShards                  = 1
)

// L1CountersPerEntry is how many admission counters (ristretto's NumCounters) an L1 keeps
// per entry of L1MaxEntries: ristretto's advice, 10 per item it holds when full.
const L1CountersPerEntry = 10

// MaxL1MaxEntries is the largest [Spec].L1MaxEntries. ristretto rounds its counter count,
// L1CountersPerEntry*L1MaxEntries, up to a power of two held in an int64; past 1<<62 counters
// that rounding overflows (and before it, the multiplication). Memory is the practical limit
// long before this one: each counter costs about two bytes.
const MaxL1MaxEntries = (1 << 62) / L1CountersPerEntry

// MaxTimeout is the longest [Spec].LoaderTimeout and [Spec].L2Timeout, about 97 years: a
// fill runs under a deadline of 2*LeaseTTL + LoaderTimeout and a degraded load under
// L2Timeout + LoaderTimeout, sums that must fit a time.Duration.
const MaxTimeout = (math.MaxInt64 - 2*LeaseGrace) / 3

// LeaseGrace is how much longer a fill lease lives than the table's loader timeout: the
// time a filler has, after its loader returned, to write the row. A filler that died
// mid-load is taken over once its lease expires, LoaderTimeout+LeaseGrace after it began.
const LeaseGrace = 500 * time.Millisecond

// ErrInvalidSpec is wrapped by every error [Spec.Resolve] returns; the text names the field
// and the rule.
var ErrInvalidSpec = errors.New("tables: invalid spec")

// Spec declares one cache table. A zero field means the default written beside it; fields
// that can be switched off take [Off]. Declare a Spec once per cache object (see
// [Registry.Declare]); the resolved Spec is what the cache runs with.
type Spec struct {
	// Name names the table in its keys (ecc:{<Name>}:<id>), its stats and its invalidations:
	// 1 to 64 bytes of [A-Za-z0-9_.-]. Required. Every row of an unsharded table shares the
	// hash tag {<Name>}, so one table lives in one cluster slot (see Shards).
	Name string

	// Shards spreads the table's rows over this many hash tags, {<Name>#0} to
	// {<Name>#<Shards-1>}, so a large or hot table spans the primaries of a cluster: the row
	// of id lives in shard keys.ShardOf(id, Shards) (CRC16 of the id mod Shards), and each
	// shard has its own coherence record and invalidation channel, so every script still runs
	// on one slot. Get, GetMany (one MGET per shard, pipelined), Set, Invalidate,
	// InvalidateAll and the reconcile work across the shards. Every process must declare a
	// table with the same Shards: a process with another count looks for rows in other
	// places and listens on other channels. Changing it is a new layout: the old layout's
	// rows are not read and expire with their TTL. Going back to an earlier count within the
	// TTL reads that layout's rows again, as old as they are (shard i of any count is the same
	// key): call InvalidateAll under the earlier count first, or wait out the TTL. In [1,
	// keys.MaxShards] (256). Default
	// DefaultShards (1): the unsharded layout ecc:{<Name>}:<id>, as before shards existed.
	Shards int

	// TTL is the lifetime of an L2 row before jitter. Default DefaultTTL (5 minutes); at
	// least 1 ms (rows are written with SET ... PX).
	TTL time.Duration

	// Jitter is the largest fraction of TTL (and of NegativeTTL) cut at random from each
	// row's lifetime, so rows filled together do not expire together: a row lives
	// TTL*(1-u*Jitter) for a uniform u in [0, 1). In [0, 1). Default DefaultJitter (0.1);
	// Off writes every row with exactly TTL.
	Jitter float64

	// L1TTL bounds how long a decoded value stays in this process's L1. An L1 entry never
	// outlives the L2 row it was copied from: its lifetime is min(L1TTL, the row's remaining
	// PTTL). Default DefaultL1TTL (1 minute); Off disables L1 (every Get reads L2).
	L1TTL time.Duration

	// NegativeTTL is the lifetime of a not-found row, written when the loader returns
	// cache.ErrNotFound: until it expires, Get answers ErrNotFound without calling the
	// loader. Default DefaultNegativeTTL (30 seconds); Off stores nothing for a not-found
	// id, so every Get of it calls the loader.
	NegativeTTL time.Duration

	// L1MaxEntries bounds L1 by number of entries (not bytes): each decoded value, and each
	// remembered not-found, costs one. Past it, ristretto's TinyLFU policy decides what
	// stays. Default DefaultL1MaxEntries (10,000); at most MaxL1MaxEntries.
	L1MaxEntries int64

	// LoaderTimeout bounds one loader call (and one batch-loader call). The loader runs
	// under context.WithoutCancel of the first caller's context plus this timeout, so one
	// caller giving up does not spoil the fill for the others. The fill lease that keeps
	// other processes from loading the same id lasts LoaderTimeout + LeaseGrace. Default
	// DefaultLoaderTimeout (5 seconds); at most MaxTimeout.
	LoaderTimeout time.Duration

	// EarlyRefreshBeta is XFetch's beta: a read of a row with r left to live refreshes it
	// early with probability exp(-r / (beta * delta)), where delta is how long the row's
	// last load took. Larger refreshes earlier. Default DefaultEarlyRefreshBeta (1.0); Off
	// disables early refresh (rows are reloaded only once they have expired).
	EarlyRefreshBeta float64

	// StaleOnError opts the table into stale-on-error and bounds it: when a Get misses L1
	// (its entry expired) and then Valkey does not answer or the loader fails, the table
	// answers the last value this process's L1 held for the id, provided it was read from L2
	// (or loaded) at most StaleOnError ago, and counts it in cache.Stats.StaleServed. The last
	// value lives only in L1: an id that was invalidated, flushed or evicted has none, and
	// then the error is returned. Default 0: off (errors are returned).
	StaleOnError time.Duration

	// StaleTimeout is how long a Get of a stale-on-error table with a stale value at hand
	// waits for Valkey and the loader before it answers the stale value (the fill goes on in
	// the background). A stale value gone by then (invalidated meanwhile, or older than
	// StaleOnError) is not served: the Get goes on as one without a stale value would, so it
	// may take up to StaleTimeout more than that. A StaleTimeout at least as long as
	// L2Timeout gives L2 its full time, so an L2 operation it cuts short counts as an L2
	// timeout towards the cache's circuit breaker; a shorter one does not. Default
	// DefaultStaleTimeout (250 ms); unused when StaleOnError is 0, though a value below 1 ms
	// (a negative one, say) is refused all the same.
	StaleTimeout time.Duration

	// L2Timeout bounds each L2 operation on the read path (a Get's read of the row, a
	// fill's reads, lease and write, GetMany's MGET, the reconcile's record reads) on its
	// own, whatever the caller's deadline: a Valkey that does not answer costs a read at
	// most this per operation (valkey-go retries reads on a broken connection until the
	// context ends, so without it a read without a deadline would wait for ever). An
	// operation cut short fails with cache.ErrL2 and cache.ErrL2Timeout; a caller's own
	// earlier deadline or cancellation is reported as the caller's. Default DefaultL2Timeout
	// (250 ms); at least 1 ms, at most MaxTimeout.
	L2Timeout time.Duration

	// DegradedLoads switches degraded mode and bounds it: when L2 fails or times out on a
	// read (or the cache's circuit breaker is open), the read is answered by the loader
	// (single-flight per id, nothing written to L2), with at most DegradedLoads loader calls
	// of this table at once in this process, so a cache outage does not stampede the
	// database; a read that waits longer than L2Timeout for a slot fails with
	// cache.ErrDegradedBusy. Default DefaultDegradedLoads (4); Off turns degraded mode off
	// (L2 failures are returned to the caller).
	DegradedLoads int

	// DegradedL1TTL bounds how long a degraded load's result stays in L1: while L2 is
	// unreachable no invalidation can be confirmed, so the entry lives min(L1TTL,
	// DegradedL1TTL), and a not-found no longer than NegativeTTL either. Default DefaultDegradedL1TTL (1 second); Off keeps degraded results
	// out of L1.
	DegradedL1TTL time.Duration

	// MaxPendingInvalidations bounds the ids a table remembers from invalidations (Set,
	// Invalidate) that could not reach Valkey; they are sent when Valkey answers again, so
	// other processes drop their copies. Past the bound the table owes one whole-table
	// invalidation (InvalidateAll) instead, sent the same way. Default
	// DefaultMaxPendingInvalidations (10,000).
	MaxPendingInvalidations int
}

// Resolve validates s and returns it with every zero field replaced by its default. The
// error wraps [ErrInvalidSpec] (and keys.ErrInvalid for a bad name).
func (s Spec) Resolve() (Spec, error) {
	if err := keys.ValidateName(s.Name); err != nil {
		return Spec{}, fmt.Errorf("%w: Name: %w", ErrInvalidSpec, err)
	}
	bad := func(field, rule string, v any) error {
		return fmt.Errorf("%w: table %s: %s is %v; %s", ErrInvalidSpec, s.Name, field, v, rule)
	}
	switch {
	case s.TTL == 0:
		s.TTL = DefaultTTL
	case s.TTL < time.Millisecond:
		return Spec{}, bad("TTL", "a row lives at least 1ms (SET ... PX)", s.TTL)
	}
	switch {
	case s.Jitter == 0:
		s.Jitter = DefaultJitter
	case s.Jitter == Off: // stays Off, so that a resolved Spec resolves to itself
	case s.Jitter < 0 || s.Jitter >= 1 || math.IsNaN(s.Jitter):
		return Spec{}, bad("Jitter", "a fraction in [0, 1), or tables.Off", s.Jitter)
	}
	switch {
	case s.L1TTL == 0:
		s.L1TTL = DefaultL1TTL
	case s.L1TTL == Off:
	case s.L1TTL < 0:
		return Spec{}, bad("L1TTL", "positive, or tables.Off to disable L1", s.L1TTL)
	}
	switch {
	case s.NegativeTTL == 0:
		s.NegativeTTL = DefaultNegativeTTL
	case s.NegativeTTL == Off:
	case s.NegativeTTL < time.Millisecond:
		return Spec{}, bad("NegativeTTL", "at least 1ms, or tables.Off", s.NegativeTTL)
	}
	switch {
	case s.L1MaxEntries == 0:
		s.L1MaxEntries = DefaultL1MaxEntries
	case s.L1MaxEntries < 0:
		return Spec{}, bad("L1MaxEntries", "a positive number of entries", s.L1MaxEntries)
	case s.L1MaxEntries > MaxL1MaxEntries:
		return Spec{}, bad("L1MaxEntries", fmt.Sprintf("at most tables.MaxL1MaxEntries (%d): L1 keeps %d counters per entry and their count must fit an int64",
			int64(MaxL1MaxEntries), L1CountersPerEntry), s.L1MaxEntries)
	}
	switch {
	case s.LoaderTimeout == 0:
		s.LoaderTimeout = DefaultLoaderTimeout
	case s.LoaderTimeout < time.Millisecond:
		return Spec{}, bad("LoaderTimeout", "at least 1ms", s.LoaderTimeout)
	case s.LoaderTimeout > MaxTimeout:
		return Spec{}, bad("LoaderTimeout", fmt.Sprintf("at most tables.MaxTimeout (%v)", MaxTimeout), s.LoaderTimeout)
	}
	switch {
	case s.EarlyRefreshBeta == 0:
		s.EarlyRefreshBeta = DefaultEarlyRefreshBeta
	case s.EarlyRefreshBeta == Off:
	case s.EarlyRefreshBeta < 0 || math.IsNaN(s.EarlyRefreshBeta) || math.IsInf(s.EarlyRefreshBeta, 0):
		return Spec{}, bad("EarlyRefreshBeta", "positive, or tables.Off", s.EarlyRefreshBeta)
	}
	switch {
	case s.StaleOnError < 0:
		return Spec{}, bad("StaleOnError", "a positive bound, or 0 for off", s.StaleOnError)
	case s.StaleTimeout == 0:
		s.StaleTimeout = DefaultStaleTimeout
	case s.StaleTimeout < time.Millisecond:
		return Spec{}, bad("StaleTimeout", "at least 1ms", s.StaleTimeout)
	}
	switch {
	case s.L2Timeout == 0:
		s.L2Timeout = DefaultL2Timeout
	case s.L2Timeout < time.Millisecond:
		return Spec{}, bad("L2Timeout", "at least 1ms", s.L2Timeout)
	case s.L2Timeout > MaxTimeout:
		return Spec{}, bad("L2Timeout", fmt.Sprintf("at most tables.MaxTimeout (%v)", MaxTimeout), s.L2Timeout)
	}
	switch {
	case s.DegradedLoads == 0:
		s.DegradedLoads = DefaultDegradedLoads
	case s.DegradedLoads == Off:
	case s.DegradedLoads < 0:
		return Spec{}, bad("DegradedLoads", "a positive number of loads, or tables.Off", s.DegradedLoads)
	}
	switch {
	case s.DegradedL1TTL == 0:
		s.DegradedL1TTL = DefaultDegradedL1TTL
	case s.DegradedL1TTL == Off:
	case s.DegradedL1TTL < time.Millisecond:
		return Spec{}, bad("DegradedL1TTL", "at least 1ms, or tables.Off", s.DegradedL1TTL)
	}
	switch {
	case s.Shards == 0:
		s.Shards = DefaultShards
	case s.Shards < 1 || s.Shards > keys.MaxShards:
		return Spec{}, bad("Shards", fmt.Sprintf("from 1 to keys.MaxShards (%d), or 0 for the default", keys.MaxShards), s.Shards)
	}
	switch {
	case s.MaxPendingInvalidations == 0:
		s.MaxPendingInvalidations = DefaultMaxPendingInvalidations
	case s.MaxPendingInvalidations < 0:
		return Spec{}, bad("MaxPendingInvalidations", "a positive number of ids", s.MaxPendingInvalidations)
	}
	return s, nil
}

// DegradedEnabled reports whether a resolved spec answers reads from the loader when L2
// fails.
func (s Spec) DegradedEnabled() bool { return s.DegradedLoads > 0 }

// StaleEnabled reports whether a resolved spec serves stale values on error.
func (s Spec) StaleEnabled() bool { return s.StaleOnError > 0 && s.L1TTL > 0 }

// L1Enabled reports whether a resolved spec keeps values in L1.
func (s Spec) L1Enabled() bool { return s.L1TTL > 0 }

// NegativeEnabled reports whether a resolved spec stores not-found rows.
func (s Spec) NegativeEnabled() bool { return s.NegativeTTL > 0 }

// EarlyRefreshEnabled reports whether a resolved spec refreshes rows early (XFetch).
func (s Spec) EarlyRefreshEnabled() bool { return s.EarlyRefreshBeta > 0 }

// LeaseTTL is the lifetime of a fill lease: LoaderTimeout + LeaseGrace.
func (s Spec) LeaseTTL() time.Duration { return s.LoaderTimeout + LeaseGrace }
