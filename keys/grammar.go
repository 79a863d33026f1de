package keys

// The grammar as data, for documents and for clients of other runtimes: every type's form
// (with placeholders), the value it holds and one line on what it is. PROTOCOL.md is generated
// from it; a test checks that every form parses back to its type.

// NameRule and IDRule state the two rules of the grammar's variable parts, as the errors of
// [ValidateName] and [ValidateID] do.
const (
	NameRule = "1 to 64 bytes of [A-Za-z0-9_.-]"
	IDRule   = "1 to 512 bytes with no control bytes (0x00-0x1F, 0x7F)"
)

// grammar is indexed by Type: form, value type, what it is.
var grammar = [...]struct{ form, value, doc string }{
	Row:      {"ecc:{<table>}:<id>", "string", "the L2 row of a cache table: a row header and a payload (SET ... PX)"},
	Record:   {"ecc:{<table>}", "hash", "the table's coherence record: fields epoch, seq, last (the token of the write that made seq) and r0 to r63 (a ring of the last 64 writes' tokens, by seq mod 64)"},
	Inval:    {"emq:{<table>}:inval", "channel", "the table's invalidation channel, a shard channel (SPUBLISH, SSUBSCRIBE)"},
	Pending:  {"emq:{<q>}:pending", "zset", "jobs ready to claim, every score 0: lex order is mint order"},
	Active:   {"emq:{<q>}:active", "zset", "claimed jobs, scored by lease deadline (ms, server clock)"},
	Schedule: {"emq:{<q>}:schedule", "zset", "jobs waiting for their run-at, scored by run-at (ms, server clock)"},
	Dead:     {"emq:{<q>}:dead", "zset", "jobs whose attempts ran out, every score 0"},
	Meta:     {"emq:{<q>}:meta", "hash", "queue state: fields paused (\"1\"), max_attempts and dead_max"},
	Wake:     {"emq:{<q>}:wake", "list", "wake-up markers idle workers block on (BLPOP), at most 16: \"1\" (work is pending) or \"s\" (the schedule's head moved earlier)"},
	Job:      {"emq:{<q>}:job:<JOB id>", "hash", "a job's row: exactly the fields state, attempts, payload"},
	Unique:   {"emq:{<q>}:uniq:<key>", "string", "an idempotency guard: the JOB id of the first job enqueued with <key>, with a TTL"},
	Topic:    {"emq:{<topic>}:topic", "channel", "a broadcast topic, a shard channel (SPUBLISH, SSUBSCRIBE)"},

	Periodic:  {"emq:{<q>}:periodic:<name>", "hash", "a periodic schedule of the queue, <name> ruled like a queue's name: fields spec, payload, last (the newest tick fired or skipped, or the declaration: unix ms, server clock) and paused (\"1\" or absent)"},
	Periodics: {"emq:{<q>}:periodics", "zset", "the names of the queue's periodic schedules, every score 0"},

	Errors: {"emq:{<q>}:errors:<JOB id>", "list", "a job's failure history, beside its row: one entry per failed attempt, oldest first, at most the last 10 (FORMAT failure); deleted with the row"},
	Result: {"emq:{<q>}:result:<JOB id>", "string", "a retired job's result (FORMAT result), written by complete only when the call asks for it, with the TTL it asks for"},

	Flow:        {"emq:{<q>}:flow", "hash", "the queue's flow control (FORMAT lanes): fields rate, per, burst (the queue's own rate), lane (the default limits of every lane, FORMAT lanelimits), hold (unix ms before which jobs without a lane are not claimed), vt (the lanes' virtual clock) and waiting (how many jobs wait in the lanes' sets)"},
	Lanes:       {"emq:{<q>}:lanes", "hash", "field <lane> -> that lane's own limits (FORMAT lanelimits), for every lane that has any"},
	LaneActive:  {"emq:{<q>}:laneactive", "hash", "field <lane> -> how many jobs of the lane are claimed (in active); no field at 0"},
	LaneReady:   {"emq:{<q>}:laneready", "zset", "the lanes that have waiting jobs of priority 0 and may give work, scored by virtual time; the member \"\" stands for the queue's jobs without a lane (pending)"},
	LaneWait:    {"emq:{<q>}:lanewait", "zset", "the lanes held back by their rate or a closure, scored by the unix ms (server clock) from which they may give work"},
	JobLane:     {"emq:{<q>}:joblane", "hash", "field <JOB id> -> the job's priority, refunds and lane (FORMAT joblane), for every job with a lane, a priority or a refund"},
	Urgent:      {"emq:{<q>}:urgent", "zset", "the waiting jobs of priority 1 to 3 of every lane, scored by minus the priority: within a priority, lex order is mint order"},
	FlowLog:     {"emq:{<q>}:flowlog", "list", "the unix ms (server clock) of the queue's latest claims, newest first, at most the queue's burst (FORMAT lanerate)"},
	LanePending: {"emq:{<q>}:lanepending:<lane>", "zset", "a lane's waiting jobs of priority 0, every score 0: lex order is mint order; <lane> is named like a queue"},
	LaneLog:     {"emq:{<q>}:lanelog:<lane>", "list", "the unix ms (server clock) of the lane's latest claims, newest first, at most its burst (FORMAT lanerate)"},

	Queues:     {"emq:queues", "zset", "the queue registry, outside any hash tag: every queue name a client wrote to (enqueue, periodic declare, pause, resume, configure, worker start), scored by the unix ms it was first seen; added with ZADD NX by clients, never by a script, and removed only when the queue is dropped (the Go bus's DropQueue)"},
	Tables:     {"ecc:tables", "zset", "the table registry, outside any hash tag: every cache table name declared, scored by the unix ms it was first declared; added with ZADD NX by clients, never by a script"},
	Workers:    {"emq:{<q>}:workers", "hash", "the queue's workers' published stats: field the worker's id, value its snapshot (FORMAT report, FORMAT workerstats); stale fields pruned by workers_report, the key expires when no worker reports"},
	TableStats: {"ecc:{<table>}#stats", "hash", "the table's caches' published stats: field the cache's id, value its snapshot (FORMAT report, FORMAT tablestats); stale fields pruned by cache_stats_report, the key expires when no cache reports"},

	ShardRow:    {"ecc:{<table>#<shard>}:<id>", "string", "the L2 row of a table spread over N shards, in the shard of its id: <shard> is CRC16-XMODEM of <id> mod N (" + ShardRule + "); the row format is a row's"},
	ShardRecord: {"ecc:{<table>#<shard>}", "hash", "a shard's coherence record, as a table's: fields epoch, seq, last and the ring r0 to r63; each shard keeps its own sequence"},
	ShardInval:  {"emq:{<table>#<shard>}:inval", "channel", "a shard's invalidation channel, a shard channel (SPUBLISH, SSUBSCRIBE), carrying the invalidations of the shard's rows"},
}

// ShardRule states the rule of a shard index, as [Table.Shard] and [Parse] apply it.
const ShardRule = "a decimal in [0, 255] without leading zeros"

// Types lists every type of the grammar, in declaration order.
func Types() []Type {
	out := make([]Type, 0, len(grammar))
	for t := range grammar {
		if grammar[t].form != "" {
			out = append(out, Type(t))
		}
	}
	return out
}

// Form is the type's key in grammar form, with placeholders for the variable parts: <table>,
// <q> or <topic> for the name in the hash tag, <shard> for a shard's index, <id>, <JOB id>,
// <key>, <name> (a schedule's name) or <lane> (a lane's name) for the id. The registries'
// forms (emq:queues, ecc:tables) have no placeholder and no hash tag.
// It is "" for an invalid Type.
func (t Type) Form() string { return t.entry().form }

// Value is the Valkey type a key of t holds: "string", "hash", "zset", "list", or "channel"
// for a shard channel, which is not a key of the keyspace. It is "" for an invalid Type.
func (t Type) Value() string { return t.entry().value }

// Doc says in one line what a key of t is. It is "" for an invalid Type.
func (t Type) Doc() string { return t.entry().doc }

func (t Type) entry() struct{ form, value, doc string } {
	if int(t) < len(grammar) {
		return grammar[t]
	}
	return struct{ form, value, doc string }{}
}
