// Package cache is EchoCache's engine: declared tables read through an in-process L1
// (ristretto) over an L2 row in Valkey over your loader.
//
// A read ([Table.Get]) is answered by the first tier that has the id:
//
//   - L1 holds decoded values: a hit is a local lookup that decodes nothing and allocates
//     nothing. An L1 entry never outlives the L2 row it was copied from. (Hits check
//     deadlines against a coarse clock that the hits themselves and a ticker keep current,
//     and against the precise clock within 20 ms of a deadline; only a process starved for
//     longer than that, with few hits, can serve an entry late, by the starvation.)
//   - L2 is the row ecc:{<table>}:<id>, read with its PTTL in one round trip. The read is
//     SET NX GET of a fill lease: where a row is, nothing is written and the reply is the
//     row; where none is, the lease is taken in the same round trip, so a cold miss costs
//     two round trips (the read, then the fill's write), as a raw GET and SET do. The value
//     is decoded by the table's [Codec] (JSON by default; [Msgpack] writes smaller rows) and
//     installed in L1.
//   - The loader runs when neither has the id. The fill is single-flight in the process and
//     guarded across processes by a fill lease written into the row (SET NX PX): however
//     many goroutines and processes miss one id at once, the loader runs once, and a filler
//     that dies is taken over when its lease expires. The filler writes the row only while
//     its lease is still there (the cache_fill script), so a load that an invalidation
//     overtook never lands, and a Get that begins after an invalidation never joins a fill
//     begun before it (read-your-own-writes holds under concurrent fills).
//
// Around that: rows are written with TTL minus a random jitter; a loader answering
// [ErrNotFound] is remembered for the table's NegativeTTL; [Table.GetMany] serves many ids
// with one MGET and one [BatchLoader] call per 1,000 of them; hot rows are refreshed shortly before they
// expire by one reader (XFetch) while the others keep reading the current value; a row
// this version cannot read is a counted miss, never a panic; every table keeps [Stats].
//
// The flow:
//
//	client, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{addr}, DisableCache: true})
//	c, err := cache.New(client, cache.Config{})
//	defer c.Close()
//	users, err := cache.NewTable(c, tables.Spec{Name: "users", TTL: 10 * time.Minute},
//		func(ctx context.Context, id int64) (User, error) {
//			u, err := db.User(ctx, id)
//			if errors.Is(err, sql.ErrNoRows) {
//				return User{}, cache.ErrNotFound // remembered for NegativeTTL
//			}
//			return u, err
//		}, nil)
//	u, err := users.Get(ctx, 42)                  // loader, then L2 row + L1 entry
//	u, err = users.Get(ctx, 42)                   // L1 hit
//	users.Forget(42)                              // drop the L1 entry only
//	u, err = users.Get(ctx, 42)                   // L2 hit, no loader call
//	many, err := users.GetMany(ctx, []int64{1, 2, 42}) // map of the ids that exist
//	st := users.Stats()                           // st.L1Hits, st.L2Hits, st.Loads, ...
//
// Writes and coherence across processes: [Table.Set] (write-through) and [Table.Invalidate]
// are one script each (cache_set, cache_invalidate) that writes or deletes the rows, bumps
// the table's sequence in its coherence record ecc:{<table>} and SPUBLISHes the invalidation
// (epoch, sequence, the previous write's token and this one's, server time, ids) on the
// table's channel, all on the table's slot;
// [Table.InvalidateAll] deletes every row and starts a new epoch. The writer drops its own
// L1 entry before the call returns. Each [Cache] holds one sharded pub/sub subscription
// (package topic; the cache does not depend on the job queue of package bus) for all its
// tables: a message drops its ids; a sequence gap, an epoch change (InvalidateAll, or a
// record lost to FLUSHALL or a restart without persistence), a queue overflow, or a
// resubscribe or reconcile (every [Config].ReconcileInterval, default 5 s) that finds the
// sequence moved past what was received flushes that table's L1, and so does a sequence
// that went back in time (Valkey restored from a snapshot, a lagging replica promoted: the
// record's ring of recent tokens tells it even once new writes pushed the sequence past
// where it was, and a gap has the table reconciled at once, while that ring still reaches
// where the table was before it, and a record back in an epoch the table had left counts
// too); the rows went back with it, so that table's rows are invalidated too (as by
// InvalidateAll).
// Nothing missed, no flush; a lost message costs at most one reconcile interval while Valkey
// answers (during an outage, no reconcile can tell: see degraded mode below). Until a table's
// subscription is confirmed its L1 takes nothing.
//
// A process does not apply its own invalidations twice: each write's token carries its
// Cache's prefix, and the subscriber skips the drops of a message with it (the writer
// dropped its entry after the script ran), following its sequence as usual.
// [Config].OnInvalidation is called after each message is applied, for metrics or to wait
// on propagation exactly; [Stats] reports the propagation delay as a histogram with its
// p50 and p99.
//
// Shards: a table declared with tables.Spec.Shards = N > 1 spreads its rows over N hash
// tags, ecc:{<table>#<i>}:<id> with i = keys.ShardOf(id, N), so a large or hot table spans
// a cluster's primaries. Each shard has its own coherence record and invalidation channel
// and every script runs on one shard's slot; Set and Invalidate go to the ids' shards,
// GetMany sends one MGET per shard in one pipeline (on a cluster, one read per row, so a
// migrating slot does not refuse it), InvalidateAll flushes every shard, and
// the reconcile reads every shard's record. A gap or regression on one shard flushes the
// whole table's L1 (which ids were lost is unknown). Every process must declare the same N.
//
// Fill races: every L1 install passes through one method that refuses an id whose
// generation (read before the L2 GET) moved meanwhile, and checks it again after the
// install, deleting the entry if an invalidation slipped in; every L2 fill is fenced by its
// lease token, which Set and Invalidate remove.
//
// Bounded L2: every L2 operation on the read path (the row read, a fill's reads, lease and
// write, GetMany's MGET, the reconcile's record reads) runs under the table's own
// tables.Spec.L2Timeout (default 250 ms), whatever the caller's deadline, and fails with
// [ErrL2] and [ErrL2Timeout] past it. A caller's own cancellation or earlier deadline is
// reported as the caller's (context.Canceled, context.DeadlineExceeded), never as ErrL2.
//
// Degraded mode (on by default; tables.Spec.DegradedLoads): when L2 fails or times out on
// a read, the read is answered by the loader instead of failing, single-flight per id and
// with at most DegradedLoads (default 4) loader calls of the table at once in the process,
// so the database behind the cache is not stampeded; nothing is written to L2, and the
// result stays in L1 for at most min(L1TTL, DegradedL1TTL) (default 1 s), since no
// invalidation can be confirmed meanwhile. A circuit breaker per [Cache] opens after
// [Config].BreakerFailures (default 3) L2 failures in a row: reads then skip L2 rather than
// pay the L2 timeout each, and every [Config].BreakerProbe (default 500 ms) the reconcile
// reads the coherence records; the first read that succeeds closes the breaker and settles
// each table (flushing its L1 if its record moved) before it leaves degraded mode. L1
// entries taken before the outage are served meanwhile until their own deadline
// (min(L1TTL, the row's PTTL)): an invalidation missed just before or during the outage
// costs up to that, not one reconcile interval.
// [Stats].Degraded, DegradedSince, DegradedLoads and BreakerOpens, and a log line on each
// change, tell when a table was degraded and for how long. In the outage test (Valkey
// SIGSTOPped 5 s under 8 readers) every Get was answered within two L2 timeouts plus the
// loader's time, with the loader at most DegradedLoads deep, and the table left degraded
// mode about 0.2 s after Valkey came back: which is why it is on by default. With it off,
// reads fail with [ErrL2] ([ErrL2Unavailable] while the breaker is open). Degraded mode
// assumes the loader reads the source of truth; a table whose truth is what Set wrote (its
// loader a fallback that may be older) should turn it off.
//
// Writes of a database-backed table: writers that commit A then B to the database may reach
// the cache in the order B, A, and a plain Set then leaves A in L2 for the row's TTL. Either
// invalidate after the commit ([Table.Invalidate]: the next read loads what the database
// holds then), or Set with a version: a table declared with [TableOpts].Version (a function
// that reads a revision or an updated_at from a value) writes versioned rows, which carry
// the value's version in the row header, and cache_set refuses a value older than the row
// it would replace, in the script, without writing or publishing anything (the newer row's
// own Set published its invalidation); the writer's L1 drops its entry, so it reads the
// newer row next ([Stats].SetsRefused counts the refusals; an equal version is written).
// Fills write versioned rows too, carrying the loaded value's version, so a later, older Set
// cannot replace what a fill loaded. A fill writes only over its own lease, which every Set
// removes, with one exception: when a versioned Set of an older value replaced the lease, the
// fill writes its newer value as a Set would (compared in the script, published), rather
// than leave the older one in L2 until its TTL.
//
// Writes during an outage: a Set, Invalidate or InvalidateAll that cannot reach Valkey (or
// meets an open breaker, then it fails at once) returns its error, and the table also
// remembers the ids, up to tables.Spec.MaxPendingInvalidations (default 10,000; past it, a
// whole-table invalidation is owed instead); the first reconcile that finds Valkey
// answering sends them, so other processes drop values the database no longer has
// ([Stats].PendingInvalidations). Until they are sent, the table stays degraded and its
// reads skip L2 for the loader (with degraded mode on), since an owed row may be stale.
//
// Stale-on-error (opt-in, tables.Spec.StaleOnError): when L2 or the loader fails, a Get
// answers the id's last L1 value if it was read at most StaleOnError ago, counted in
// [Stats].StaleServed. The stale value lives only in L1: invalidated, flushed or evicted
// ids have none. [Stats] also counts invalidations sent and received, gaps, flushes,
// reconciles, refused installs and the propagation delay, which compares the server's TIME
// in the message with the local clock (on one host, or with synchronized clocks).
//
// For tools in other processes: [Tables] lists every table any Cache declared (a sorted set
// outside any hash tag, keys.TableRegistry, written in the background after a declaration),
// and every Cache publishes each table's [Stats] every [Config].StatsInterval (default 5 s)
// to the table's ecc:{<table>}#stats, which [ReadStats] reads and sums. Background failures
// are logged to [Config].Logger, default slog.Default().
//
//	err = users.Set(ctx, 42, u)          // row written, every process's L1 drops 42
//	err = users.Invalidate(ctx, 42, 43)  // rows deleted, every L1 drops them
//	err = users.InvalidateAll(ctx)       // every row deleted, every L1 flushed
package cache
