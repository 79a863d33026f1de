package keys

// The keys tools read: the two registries (which queues and tables exist, or existed) and the
// stats the library's processes publish.
//
// The registries are the grammar's only keys outside any hash tag: each is one sorted set in
// one slot, so listing every queue is one ZRANGE on any deployment (on a cluster, any node
// redirects to the slot's primary), not a SCAN of every primary. A client adds a name with
// ZADD NX, the score the unix time in ms at which it first saw the name; NX keeps the first
// score. No script touches them, so no script's keys leave its hash tag.

const (
	queueRegistry    = busPrefix + "queues"
	tableRegistry    = cachePrefix + "tables"
	tableStatsSuffix = "#stats"
)

// QueueRegistry is emq:queues, the zset of every queue name clients wrote to, scored by the
// unix ms the name was first seen (ZADD NX).
func QueueRegistry() string { return queueRegistry }

// TableRegistry is ecc:tables, the zset of every cache table name declared, scored by the unix
// ms the name was first declared (ZADD NX).
func TableRegistry() string { return tableRegistry }

// Workers is emq:{<q>}:workers, the hash of the stats the queue's workers publish: one field
// per worker id, its value a JSON snapshot stamped by the server (see lua/workers_report.lua).
func (q Queue) Workers() string { return busPrefix + "{" + q.must().name + "}:" + suffix[Workers] }

// Stats is ecc:{<table>}#stats, the hash of the stats the caches that declared the table
// publish: one field per cache id, its value a JSON snapshot stamped by the server (see
// lua/cache_stats_report.lua). The "#" after the hash tag keeps it apart from every row
// ecc:{<table>}:<id>, whatever the id.
func (t Table) Stats() string { return cachePrefix + "{" + t.must().name + "}" + tableStatsSuffix }
