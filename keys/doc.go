// Package keys is the one key-builder of EchoCache and EchoMQ: the closed grammar of every
// key and channel the library writes, its total parse, branded JOB ids, and the cluster slot.
//
// Two roles share one engine under two prefixes, each hash-tagged on a validated name (but for
// the two registries), so every key of one table or one queue lands in one cluster slot by
// construction:
//
//	ecc:{<table>}:<id>        the L2 row of a cache table          (Table.Row)
//	ecc:{<table>}             the table's coherence record         (Table.Record)
//	emq:{<table>}:inval       the table's invalidation channel     (Table.Inval)
//	emq:{<q>}:pending         score-0 zset: lex order is mint order (Queue.Pending)
//	emq:{<q>}:active          zset by lease deadline                (Queue.Active)
//	emq:{<q>}:schedule        zset by run-at                        (Queue.Schedule)
//	emq:{<q>}:dead            score-0 zset                          (Queue.Dead)
//	emq:{<q>}:meta            hash: queue state                     (Queue.Meta)
//	emq:{<q>}:wake            wake-up marker for idle workers       (Queue.Wake)
//	emq:{<q>}:job:<JOB id>    hash: state, attempts, payload        (Queue.Job)
//	emq:{<q>}:uniq:<key>      idempotency guard                     (Queue.Unique)
//	emq:{<q>}:periodic:<name> hash: one periodic schedule           (Queue.Periodic)
//	emq:{<q>}:periodics       score-0 zset: the schedules' names    (Queue.Periodics)
//	emq:{<q>}:errors:<JOB id> list: a job's failure history         (Queue.Errors)
//	emq:{<q>}:result:<JOB id> string: a retired job's result        (Queue.Result)
//	emq:{<q>}:flow            hash: the queue's rate, lane defaults (Queue.Flow)
//	emq:{<q>}:lanes           hash: lane -> its own limits          (Queue.Lanes)
//	emq:{<q>}:laneactive      hash: lane -> claimed jobs            (Queue.LaneActive)
//	emq:{<q>}:laneready       zset: lanes with work, virtual time   (Queue.LaneReady)
//	emq:{<q>}:lanewait        zset: held-back lanes, by ms          (Queue.LaneWait)
//	emq:{<q>}:joblane         hash: job -> priority, lane           (Queue.JobLane)
//	emq:{<q>}:urgent          zset: jobs of priority 1..3           (Queue.Urgent)
//	emq:{<q>}:flowlog         list: the queue's latest claim times  (Queue.FlowLog)
//	emq:{<q>}:lanepending:<lane> score-0 zset: a lane's jobs        (Queue.LanePending)
//	emq:{<q>}:lanelog:<lane>  list: a lane's latest claim times     (Queue.LaneLog)
//	emq:{<topic>}:topic       broadcast channel                     (TopicChannel)
//	emq:{<q>}:workers         hash: the workers' published stats   (Queue.Workers)
//	ecc:{<table>}#stats       hash: the caches' published stats    (Table.Stats)
//	emq:queues                zset: the queue registry, no tag      (QueueRegistry)
//	ecc:tables                zset: the table registry, no tag      (TableRegistry)
//
// The two registries are the only keys outside a hash tag: each is one sorted set in one
// slot, written with ZADD NX by clients (never by a script), so a tool lists every queue or
// table with one ZRANGE on any deployment.
//
// A cache table spread over N shards (tables.Spec.Shards) has one hash tag per shard,
// {<table>#<shard>}, and the same three keys under each; the row of id lives in shard
// [ShardOf](id, N), so the table's rows spread over N slots while every script still runs on
// one:
//
//	ecc:{<table>#<shard>}:<id>        a row, in its shard              (Table.Shard, then Row)
//	ecc:{<table>#<shard>}             the shard's coherence record     (Record)
//	emq:{<table>#<shard>}:inval       the shard's invalidation channel (Inval)
//
// "#" is no name byte, so no table's name can spell a shard's tag, and a shard's rows never
// match another table's (or another shard's) row prefix.
//
// The two channels are shard channels: published with SPUBLISH (by a script, from the slot of
// the table's keys, for the invalidations) and received with SSUBSCRIBE. [Types], with each
// type's [Type.Form], [Type.Value] and [Type.Doc], is the same table as data: PROTOCOL.md at the
// repository root is generated from it and from the script headers of package lua.
//
// Names are validated once, when a [Table] or [Queue] is built; after that every builder is a
// concatenation. [Parse] reads any string back into a [Key] or refuses it with an error that
// wraps [ErrInvalid] and names the broken rule:
//
//	q, err := keys.NewQueue("orders")   // "ord{ers" would be refused here
//	row, err := q.Job(keys.NewJobID())  // emq:{orders}:job:JOB_01J...
//	k, err := keys.Parse(row)           // Key{Role: Bus, Name: "orders", Type: Job, ID: "JOB_01J..."}
//	keys.Slot(row)                      // 105, like every key of {orders}
package keys
