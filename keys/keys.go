package keys

import (
	"errors"
	"fmt"
	"strconv"
)

// The two roles' key prefixes. Only this package spells them.
const (
	cachePrefix = "ecc:"
	busPrefix   = "emq:"
)

// Limits of the grammar.
const (
	// MaxNameLen is the longest table, queue or topic name, in bytes.
	MaxNameLen = 64
	// MaxIDLen is the longest row id or idempotency key, in bytes.
	MaxIDLen = 512
	// MaxShards is the most shards a cache table may spread over: shard indexes run from 0
	// to MaxShards-1.
	MaxShards = 256
)

// ErrInvalid is wrapped by every error this package returns for a name, id or key that the
// grammar refuses; the error text names the rule that was broken.
var ErrInvalid = errors.New("keys: invalid")

// Role says which half of the library a key belongs to.
type Role uint8

// The roles. The zero Role is invalid, so a zero Key never passes for a real one.
const (
	Cache Role = iota + 1 // ecc: derived state
	Bus                   // emq: authoritative state
)

func (r Role) String() string {
	switch r {
	case Cache:
		return "cache"
	case Bus:
		return "bus"
	}
	return fmt.Sprintf("Role(%d)", uint8(r))
}

// Type is the closed set of key and channel types.
type Type uint8

// The types of the grammar. Cache types live under ecc:, the others under emq:.
const (
	Row    Type = iota + 1 // ecc:{<table>}:<id>     string: the L2 row
	Record                 // ecc:{<table>}          hash: epoch and invalidation sequence
	Inval                  // emq:{<table>}:inval    channel: the table's invalidations

	Pending  // emq:{<q>}:pending        zset, score 0: lex order is mint order
	Active   // emq:{<q>}:active         zset by lease deadline (ms, server clock)
	Schedule // emq:{<q>}:schedule       zset by run-at (ms)
	Dead     // emq:{<q>}:dead           zset, score 0
	Meta     // emq:{<q>}:meta           hash: queue state
	Wake     // emq:{<q>}:wake           list: wake-up marker for blocked workers
	Job      // emq:{<q>}:job:<JOB id>   hash: state, attempts, payload
	Unique   // emq:{<q>}:uniq:<key>     string: idempotency guard holding a JOB id
	Topic    // emq:{<topic>}:topic      channel: a broadcast topic

	Periodic  // emq:{<q>}:periodic:<name> hash: one periodic schedule (spec, payload, last, paused)
	Periodics // emq:{<q>}:periodics       zset, score 0: the names of the queue's schedules

	Errors // emq:{<q>}:errors:<JOB id>  list: a job's failure history, beside its row
	Result // emq:{<q>}:result:<JOB id>  string: a retired job's result, kept for a TTL

	// Lanes: named sub-streams of a queue with their own limits (see package bus, Lanes).
	Flow        // emq:{<q>}:flow               hash: the queue's rate, its lanes' defaults, virtual clock
	Lanes       // emq:{<q>}:lanes              hash: lane -> its own limits
	LaneActive  // emq:{<q>}:laneactive         hash: lane -> how many of its jobs are claimed
	LaneReady   // emq:{<q>}:laneready          zset: lanes with waiting work, by virtual time
	LaneWait    // emq:{<q>}:lanewait           zset: lanes held back, by the ms they may give work
	JobLane     // emq:{<q>}:joblane            hash: JOB id -> priority, refunds and lane
	Urgent      // emq:{<q>}:urgent             zset: waiting jobs of priority 1..3, score -priority
	FlowLog     // emq:{<q>}:flowlog            list: the claim times the queue's rate counts
	LanePending // emq:{<q>}:lanepending:<lane> zset, score 0: a lane's waiting jobs
	LaneLog     // emq:{<q>}:lanelog:<lane>     list: the claim times a lane's rate counts

	// The registries and the published stats, for tools (see registry.go).
	Queues     // emq:queues               zset: the queue registry, outside any hash tag
	Tables     // ecc:tables               zset: the table registry, outside any hash tag
	Workers    // emq:{<q>}:workers        hash: the workers' published stats, by worker id
	TableStats // ecc:{<table>}#stats      hash: the caches' published stats of a table, by cache id

	// The types of a sharded cache table: one hash tag per shard, {<table>#<shard>}, where
	// "#" is no name byte, so no other table's keys can take that form.
	ShardRow    // ecc:{<table>#<shard>}:<id>   string: the L2 row, in its shard
	ShardRecord // ecc:{<table>#<shard>}        hash: the shard's coherence record
	ShardInval  // emq:{<table>#<shard>}:inval  channel: the shard's invalidations

	lastType = ShardInval // the last type of the grammar: Parse tries every type up to it
)

// shardSep separates a sharded table's name from its shard index in the hash tag.
const shardSep = '#'

// suffix is each bus type's spelling after "emq:{<name>}:". Job and Unique carry an id after it.
var suffix = [...]string{
	Inval:    "inval",
	Pending:  "pending",
	Active:   "active",
	Schedule: "schedule",
	Dead:     "dead",
	Meta:     "meta",
	Wake:     "wake",
	Job:      "job:",
	Unique:   "uniq:",
	Topic:    "topic",

	Periodic:  "periodic:",
	Periodics: "periodics",

	Errors: "errors:",
	Result: "result:",

	Flow:        "flow",
	Lanes:       "lanes",
	LaneActive:  "laneactive",
	LaneReady:   "laneready",
	LaneWait:    "lanewait",
	JobLane:     "joblane",
	Urgent:      "urgent",
	FlowLog:     "flowlog",
	LanePending: "lanepending:",
	LaneLog:     "lanelog:",

	Workers: "workers",
}

func (t Type) String() string {
	switch t {
	case Row:
		return "row"
	case Record:
		return "record"
	case Job:
		return "job"
	case Unique:
		return "uniq"
	case Periodic:
		return "periodic"
	case Errors:
		return "errors"
	case Result:
		return "result"
	case LanePending:
		return "lanepending"
	case LaneLog:
		return "lanelog"
	case Queues:
		return "queues"
	case Tables:
		return "tables"
	case TableStats:
		return "stats"
	case ShardRow:
		return "shard-row"
	case ShardRecord:
		return "shard-record"
	case ShardInval:
		return "shard-inval"
	}
	if int(t) < len(suffix) && suffix[t] != "" {
		return suffix[t]
	}
	return fmt.Sprintf("Type(%d)", uint8(t))
}

// Key is a parsed key or channel: its role, the name in its hash tag, its type, the id for
// the types that carry one (Row, ShardRow, Job, Unique, Errors and Result, whose id is a JOB
// id, Periodic, whose id is the schedule's name, and LanePending and LaneLog, whose id is the
// lane's name), and the shard index for the shard types
// (0 for every other type). The two registries (Queues, Tables) have no hash tag: their Name
// is "".
type Key struct {
	Role  Role
	Name  string
	Type  Type
	ID    string
	Shard int
}

// Tag is what the key's hash tag holds: the name, or for the shard types
// "<name>#<shard>". Its cluster slot is the key's.
func (k Key) Tag() string {
	switch k.Type {
	case ShardRow, ShardRecord, ShardInval:
		return shardTag(k.Name, k.Shard)
	}
	return k.Name
}

// String builds the key's text. It is the inverse of [Parse] for every valid Key.
func (k Key) String() string {
	switch k.Type {
	case Row, ShardRow:
		return cachePrefix + "{" + k.Tag() + "}:" + k.ID
	case Record, ShardRecord:
		return cachePrefix + "{" + k.Tag() + "}"
	case ShardInval:
		return busPrefix + "{" + k.Tag() + "}:" + suffix[Inval]
	case TableStats:
		return cachePrefix + "{" + k.Name + "}" + tableStatsSuffix
	case Queues:
		return queueRegistry
	case Tables:
		return tableRegistry
	case Job, Unique, Periodic, Errors, Result, LanePending, LaneLog:
		return busPrefix + "{" + k.Name + "}:" + suffix[k.Type] + k.ID
	}
	if int(k.Type) < len(suffix) && suffix[k.Type] != "" {
		return busPrefix + "{" + k.Name + "}:" + suffix[k.Type]
	}
	return ""
}

// ValidateName checks a table, queue or topic name: 1 to 64 bytes of [A-Za-z0-9_.-].
func ValidateName(name string) error {
	if len(name) == 0 {
		return fmt.Errorf("%w name: empty; a name is 1 to %d bytes of [A-Za-z0-9_.-]", ErrInvalid, MaxNameLen)
	}
	if len(name) > MaxNameLen {
		return fmt.Errorf("%w name: %d bytes; a name is 1 to %d bytes of [A-Za-z0-9_.-]", ErrInvalid, len(name), MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		if !nameByte(name[i]) {
			return fmt.Errorf("%w name %q: byte %q at %d; a name is 1 to %d bytes of [A-Za-z0-9_.-]", ErrInvalid, name, name[i:i+1], i, MaxNameLen)
		}
	}
	return nil
}

func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-'
}

// ValidateID checks a row id or idempotency key: 1 to 512 bytes, no control bytes
// (0x00-0x1F and 0x7F).
func ValidateID(id string) error {
	if len(id) == 0 {
		return fmt.Errorf("%w id: empty; an id is 1 to %d bytes with no control bytes", ErrInvalid, MaxIDLen)
	}
	if len(id) > MaxIDLen {
		return fmt.Errorf("%w id: %d bytes; an id is 1 to %d bytes with no control bytes", ErrInvalid, len(id), MaxIDLen)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x20 || c == 0x7f {
			return fmt.Errorf("%w id: control byte %#02x at %d; an id is 1 to %d bytes with no control bytes", ErrInvalid, c, i, MaxIDLen)
		}
	}
	return nil
}

// shardTag is the hash tag of a table's shard: "<name>#<shard>".
func shardTag(name string, shard int) string {
	return name + string(shardSep) + strconv.Itoa(shard)
}

// ShardOf is the shard, of n, that holds the row of id in a sharded table: CRC16-XMODEM of
// the id's bytes (the cluster's key hash, see [Slot]) mod n. Every client of a sharded table
// must place rows by this rule. It is 0 when n is 1 or less.
func ShardOf(id string, n int) int {
	if n <= 1 {
		return 0
	}
	return int(crc16(id)) % n
}
