package cache

import (
	"sync/atomic"
	"time"
)

// tableStats are the counters off the hot path.
type tableStats struct {
	l2Hits, misses, loads, loadErrors, loadNanos atomic.Int64
	fillsRefused, installsRefused, corrupt       atomic.Int64
	earlyRefreshes, leaseWaits, leaseTakeovers   atomic.Int64
	staleServed, degradedLoads, setsRefused      atomic.Int64
}

// Stats are a table's counters since it was made.
type Stats struct {
	L1Hits int64 // reads answered from L1 (values and remembered not-founds)
	L2Hits int64 // reads answered from an L2 row (values and not-found rows)
	// Misses counts reads that found neither and went to a fill: one that waited for another
	// filler's row is a miss, not also an L2 hit.
	Misses int64
	// Loads counts loader and batch-loader calls; LoadErrors those that failed (an error, a
	// timeout, a panic; ErrNotFound is an answer, not a failure). LoadTime is their total
	// duration.
	Loads      int64
	LoadErrors int64
	LoadTime   time.Duration
	// FillsRefused counts L2 writes that cache_fill refused: the row no longer held this
	// filler's lease (it expired and was taken over, or it was deleted). A versioned fill
	// whose lease an older Set replaced, written over it as a Set, is not counted.
	FillsRefused int64
	// SetsRefused counts Sets of a versioned table (see [TableOpts].Version) that cache_set
	// refused because L2 held a higher version: nothing was written or published.
	SetsRefused int64
	// InstallsRefused counts L1 installs refused because the id was forgotten (dropped or
	// invalidated) or the table flushed after the read that produced the value began.
	InstallsRefused int64
	// CorruptRows counts rows that could not be read (another format version, bytes that
	// do not decode); each was replaced by a fresh fill.
	CorruptRows int64
	// EarlyRefreshes counts early refreshes (XFetch) this process claimed and ran.
	EarlyRefreshes int64
	// LeaseWaits counts fills that waited on another filler's lease; LeaseTakeovers those
	// that ended with this process taking the fill over because the lease went away
	// without a row (its holder died and it expired, or the holder's load failed).
	LeaseWaits     int64
	LeaseTakeovers int64

	// StaleServed counts Gets of a stale-on-error table answered with a stale L1 value
	// because Valkey or the loader failed (see tables.Spec.StaleOnError).
	StaleServed int64

	// Degraded tells whether the table is in degraded mode (see tables.Spec.DegradedLoads):
	// L2 failed on a read since the last reconcile that settled the table, or the cache's
	// breaker is open. DegradedSince is when it entered it (zero when not degraded).
	// DegradedLoads counts loader calls made in degraded mode; BreakerOpens counts the
	// times the Cache's circuit breaker opened (the same figure for every table of a Cache).
	Degraded      bool
	DegradedSince time.Time
	DegradedLoads int64
	BreakerOpens  int64
	// PendingInvalidations is how many ids wait to be invalidated because their Set or
	// Invalidate could not reach Valkey; -1 when a whole-table invalidation is owed.
	PendingInvalidations int

	// InvalidationsSent counts invalidation messages this process published for the table
	// (one per Set, per Invalidate batch, per InvalidateAll; on a table of N shards, one per
	// shard an Invalidate touches and N per InvalidateAll, each shard publishing on its own
	// channel); InvalidationsReceived those its subscriber received (its own included).
	InvalidationsSent     int64
	InvalidationsReceived int64
	// Gaps counts messages that skipped sequence numbers: invalidations were lost.
	Gaps int64
	// Regressions counts messages and reconciles that found the table's sequence gone back
	// in time (Valkey restored from a snapshot, a replica that lagged promoted): the
	// invalidations after the restored point were lost, so each flushed the table's L1.
	Regressions int64
	// Flushes counts whole-table L1 flushes the coherence made: on a gap, an epoch change
	// (InvalidateAll, or a record lost to FLUSHALL or a restart), a subscriber overflow, or
	// a resubscribe or reconcile that found the sequence moved past what was received.
	// ForgetAll and InvalidateAll's own local flush are not counted.
	Flushes int64
	// Reconciles counts reads of the table's coherence record by the periodic reconcile
	// and after resubscribes.
	Reconciles int64
	// PropagationCount, PropagationTotal and PropagationMax describe the delay from a
	// write's script (the server's TIME, carried in the message) to this process receiving
	// its invalidation, by this process's clock. They assume the clocks of the server's host
	// and this process's host agree; on one host they do.
	PropagationCount int64
	PropagationTotal time.Duration
	PropagationMax   time.Duration
	// PropagationP50 and PropagationP99 are the median and the 99th percentile of the same
	// delays, read from PropagationHistogram (so rounded up to its bucket's top, within 13%);
	// PropagationHistogram lists its non-empty buckets, shortest first, for an exporter.
	// Every message received counts, this process's own writes included.
	PropagationP50       time.Duration
	PropagationP99       time.Duration
	PropagationHistogram []HistogramBucket
}

// Stats returns the table's counters.
func (t *Table[K, V]) Stats() Stats { return t.stats() }

func (t *Table[K, V]) stats() Stats {
	s := Stats{
		L1Hits:          t.hits.sum(),
		L2Hits:          t.st.l2Hits.Load(),
		Misses:          t.st.misses.Load(),
		Loads:           t.st.loads.Load(),
		LoadErrors:      t.st.loadErrors.Load(),
		LoadTime:        time.Duration(t.st.loadNanos.Load()),
		FillsRefused:    t.st.fillsRefused.Load(),
		SetsRefused:     t.st.setsRefused.Load(),
		InstallsRefused: t.st.installsRefused.Load(),
		CorruptRows:     t.st.corrupt.Load(),
		EarlyRefreshes:  t.st.earlyRefreshes.Load(),
		LeaseWaits:      t.st.leaseWaits.Load(),
		LeaseTakeovers:  t.st.leaseTakeovers.Load(),
		StaleServed:     t.st.staleServed.Load(),
		DegradedLoads:   t.st.degradedLoads.Load(),
		BreakerOpens:    t.c.brk.opens.Load(),

		PendingInvalidations: t.pending.count(),
	}
	t.cs.fillStats(&s)
	return s
}

// Tier is the tier that answered a read ([Table.Lookup]).
type Tier uint8

// The tiers, fastest first.
const (
	TierNone     Tier = iota // no tier answered: the read failed before reaching one
	TierL1                   // the in-process L1
	TierL2                   // the L2 row in Valkey
	TierFill                 // a fill: this process's loader, or another filler's result awaited
	TierStale                // stale-on-error: the last L1 value, served because L2 or the loader failed
	TierDegraded             // degraded mode: this process's loader, because L2 failed or the breaker is open
)

func (t Tier) String() string {
	switch t {
	case TierL1:
		return "l1"
	case TierL2:
		return "l2"
	case TierFill:
		return "loader"
	case TierStale:
		return "stale"
	case TierDegraded:
		return "degraded"
	}
	return "none"
}
