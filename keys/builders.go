package keys

import "fmt"

// Table builds the keys of one cache table, or of one shard of a sharded table (see
// [Table.Shard]). Its name was validated once by [NewTable], so every builder is a
// concatenation. The zero Table is not usable: its builders panic.
type Table struct {
	name, rowPrefix, record, inval string
	shard                          int // -1 for the table itself, else the shard's index
}

// NewTable validates name and returns the table's key builder.
func NewTable(name string) (Table, error) {
	if err := ValidateName(name); err != nil {
		return Table{}, fmt.Errorf("table: %w", err)
	}
	return Table{
		name:      name,
		rowPrefix: cachePrefix + "{" + name + "}:",
		record:    cachePrefix + "{" + name + "}",
		inval:     busPrefix + "{" + name + "}:" + suffix[Inval],
		shard:     -1,
	}, nil
}

// Shard builds the keys of shard i of the table, for a table spread over shards: its rows
// ecc:{<table>#<i>}:<id>, its coherence record ecc:{<table>#<i>} and its invalidation channel
// emq:{<table>#<i>}:inval, all under the hash tag {<table>#<i>}, so each shard lands in a slot
// of its own and every script over one shard stays single-slot. "#" is no name byte: no
// other table's key can spell a shard's. i is in [0, MaxShards); place a row with [ShardOf].
func (t Table) Shard(i int) (Table, error) {
	t.must()
	if t.shard >= 0 {
		return Table{}, fmt.Errorf("%w table %s: shard %d of a shard", ErrInvalid, t.name, i)
	}
	if i < 0 || i >= MaxShards {
		return Table{}, fmt.Errorf("%w table %s: shard %d; a shard is in [0, %d]", ErrInvalid, t.name, i, MaxShards-1)
	}
	tag := shardTag(t.name, i)
	return Table{
		name:      t.name,
		rowPrefix: cachePrefix + "{" + tag + "}:",
		record:    cachePrefix + "{" + tag + "}",
		inval:     busPrefix + "{" + tag + "}:" + suffix[Inval],
		shard:     i,
	}, nil
}

// ShardIndex is the shard this builder is for, and false for the table itself.
func (t Table) ShardIndex() (int, bool) { return t.must().shard, t.shard >= 0 }

// MustTable is [NewTable] that panics on an invalid name, for names fixed in code.
func MustTable(name string) Table {
	t, err := NewTable(name)
	if err != nil {
		panic(err)
	}
	return t
}

// Name is the table's name.
func (t Table) Name() string { return t.must().name }

// Row is the L2 row ecc:{<table>}:<id> (ecc:{<table>#<shard>}:<id> for a shard).
func (t Table) Row(id string) (string, error) {
	if err := ValidateID(id); err != nil {
		return "", fmt.Errorf("table %s row: %w", t.must().name, err)
	}
	return t.must().rowPrefix + id, nil
}

// RowPrefix is ecc:{<table>}: (or ecc:{<table>#<shard>}:) — what every row key of the table
// (or shard) starts with.
func (t Table) RowPrefix() string { return t.must().rowPrefix }

// Record is the table's coherence record ecc:{<table>} (hash: epoch, seq, last), or the
// shard's ecc:{<table>#<shard>}.
func (t Table) Record() string { return t.must().record }

// Inval is the table's invalidation channel emq:{<table>}:inval, or the shard's
// emq:{<table>#<shard>}:inval. It shares the hash tag of the rows and the record, so a script
// on their slot may publish on it.
func (t Table) Inval() string { return t.must().inval }

func (t Table) must() Table {
	if t.name == "" {
		panic("keys: zero Table; build one with keys.NewTable")
	}
	return t
}

// Queue builds the keys of one EchoMQ queue. Every key it builds shares the hash tag {<q>},
// so every script over one queue is single-slot on a cluster. The zero Queue panics.
type Queue struct {
	name                                                 string
	pending, active, schedule, dead, meta, wake, jobBase string
	uniqBase, periodicBase, periodics                    string
	errorsBase, resultBase                               string

	flow, lanes, laneActive, laneReady, laneWait, jobLane, urgent, flowLog string
	lanePendingBase, laneLogBase                                           string
}

// NewQueue validates name and returns the queue's key builder.
func NewQueue(name string) (Queue, error) {
	if err := ValidateName(name); err != nil {
		return Queue{}, fmt.Errorf("queue: %w", err)
	}
	base := busPrefix + "{" + name + "}:"
	return Queue{
		name:     name,
		pending:  base + suffix[Pending],
		active:   base + suffix[Active],
		schedule: base + suffix[Schedule],
		dead:     base + suffix[Dead],
		meta:     base + suffix[Meta],
		wake:     base + suffix[Wake],
		jobBase:  base + suffix[Job],
		uniqBase: base + suffix[Unique],

		periodicBase: base + suffix[Periodic],
		periodics:    base + suffix[Periodics],

		flow:            base + suffix[Flow],
		lanes:           base + suffix[Lanes],
		laneActive:      base + suffix[LaneActive],
		laneReady:       base + suffix[LaneReady],
		laneWait:        base + suffix[LaneWait],
		jobLane:         base + suffix[JobLane],
		urgent:          base + suffix[Urgent],
		flowLog:         base + suffix[FlowLog],
		lanePendingBase: base + suffix[LanePending],
		laneLogBase:     base + suffix[LaneLog],
		errorsBase:      base + suffix[Errors],
		resultBase:      base + suffix[Result],
	}, nil
}

// MustQueue is [NewQueue] that panics on an invalid name, for names fixed in code.
func MustQueue(name string) Queue {
	q, err := NewQueue(name)
	if err != nil {
		panic(err)
	}
	return q
}

// Name is the queue's name.
func (q Queue) Name() string { return q.must().name }

// Pending is emq:{<q>}:pending.
func (q Queue) Pending() string { return q.must().pending }

// Active is emq:{<q>}:active.
func (q Queue) Active() string { return q.must().active }

// Schedule is emq:{<q>}:schedule.
func (q Queue) Schedule() string { return q.must().schedule }

// Dead is emq:{<q>}:dead.
func (q Queue) Dead() string { return q.must().dead }

// Meta is emq:{<q>}:meta.
func (q Queue) Meta() string { return q.must().meta }

// Wake is emq:{<q>}:wake, the marker idle workers block on.
func (q Queue) Wake() string { return q.must().wake }

// JobPrefix is emq:{<q>}:job:, the prefix of every job row of the queue. It is a prefix, not
// a key: [Parse] refuses it. Scripts derive job rows from it by appending a JOB id.
func (q Queue) JobPrefix() string { return q.must().jobBase }

// Job is the job row emq:{<q>}:job:<JOB id>. It refuses the zero (unbranded) JobID.
func (q Queue) Job(id JobID) (string, error) {
	return branded(q.must().jobBase, id)
}

// Errors is the job's failure history emq:{<q>}:errors:<JOB id>, a list beside the row (never
// in it): one entry per failed attempt, the newest last. It refuses the zero JobID.
func (q Queue) Errors(id JobID) (string, error) {
	return branded(q.must().errorsBase, id)
}

// Result is a retired job's result emq:{<q>}:result:<JOB id>, a string kept for a TTL when
// the job's completion asked for it. It refuses the zero JobID.
func (q Queue) Result(id JobID) (string, error) {
	return branded(q.must().resultBase, id)
}

// branded is base followed by id, refusing the zero (unbranded) JobID.
func branded(base string, id JobID) (string, error) {
	if id.IsZero() {
		return "", fmt.Errorf("%w job id: the zero JobID is not branded; mint ids with keys.NewJobID or read them with keys.ParseJobID", ErrInvalid)
	}
	return base + id.s, nil
}

// Unique is the idempotency guard emq:{<q>}:uniq:<key>.
func (q Queue) Unique(key string) (string, error) {
	if err := ValidateID(key); err != nil {
		return "", fmt.Errorf("queue %s unique key: %w", q.must().name, err)
	}
	return q.must().uniqBase + key, nil
}

// Periodic is the schedule row emq:{<q>}:periodic:<name> (hash: spec, payload, last,
// paused). A schedule is named like a queue: 1 to 64 bytes of [A-Za-z0-9_.-].
func (q Queue) Periodic(name string) (string, error) {
	if err := ValidateName(name); err != nil {
		return "", fmt.Errorf("queue %s periodic: %w", q.must().name, err)
	}
	return q.must().periodicBase + name, nil
}

// PeriodicPrefix is emq:{<q>}:periodic:, the prefix of every schedule row of the queue. It is
// a prefix, not a key: [Parse] refuses it.
func (q Queue) PeriodicPrefix() string { return q.must().periodicBase }

// Periodics is emq:{<q>}:periodics, the score-0 index of the queue's schedule names.
func (q Queue) Periodics() string { return q.must().periodics }

// Flow is emq:{<q>}:flow, the queue's flow-control record: its own rate, the default limits of
// its lanes, and the lanes' virtual clock.
func (q Queue) Flow() string { return q.must().flow }

// Lanes is emq:{<q>}:lanes, the hash of the limits of every lane that has limits of its own.
func (q Queue) Lanes() string { return q.must().lanes }

// LaneActive is emq:{<q>}:laneactive, the hash of each lane's count of claimed jobs.
func (q Queue) LaneActive() string { return q.must().laneActive }

// LaneReady is emq:{<q>}:laneready, the lanes with waiting work, scored by virtual time.
func (q Queue) LaneReady() string { return q.must().laneReady }

// LaneWait is emq:{<q>}:lanewait, the lanes held back by a rate or a closure, scored by the
// server ms at which they may give work again.
func (q Queue) LaneWait() string { return q.must().laneWait }

// JobLane is emq:{<q>}:joblane, the hash of the priority, refunds and lane of every job that
// has a lane or a priority.
func (q Queue) JobLane() string { return q.must().jobLane }

// Urgent is emq:{<q>}:urgent, the waiting jobs of priority 1 and above, scored by minus their
// priority.
func (q Queue) Urgent() string { return q.must().urgent }

// FlowLog is emq:{<q>}:flowlog, the claim times the queue's own rate counts.
func (q Queue) FlowLog() string { return q.must().flowLog }

// LanePending is the lane's set of waiting jobs emq:{<q>}:lanepending:<lane>. A lane is named
// like a queue: 1 to 64 bytes of [A-Za-z0-9_.-].
func (q Queue) LanePending(lane string) (string, error) {
	if err := ValidateName(lane); err != nil {
		return "", fmt.Errorf("queue %s lane: %w", q.must().name, err)
	}
	return q.must().lanePendingBase + lane, nil
}

// LaneLog is the lane's list of claim times emq:{<q>}:lanelog:<lane>, which its rate counts.
func (q Queue) LaneLog(lane string) (string, error) {
	if err := ValidateName(lane); err != nil {
		return "", fmt.Errorf("queue %s lane: %w", q.must().name, err)
	}
	return q.must().laneLogBase + lane, nil
}

// LanePendingPrefix is emq:{<q>}:lanepending:, the prefix of every lane's set of waiting jobs.
// It is a prefix, not a key: [Parse] refuses it.
func (q Queue) LanePendingPrefix() string { return q.must().lanePendingBase }

// LaneLogPrefix is emq:{<q>}:lanelog:, the prefix of every lane's list of claim times. It is a
// prefix, not a key: [Parse] refuses it.
func (q Queue) LaneLogPrefix() string { return q.must().laneLogBase }

// ValidateLane checks a lane's name: the rule of names, 1 to 64 bytes of [A-Za-z0-9_.-].
func ValidateLane(lane string) error {
	if err := ValidateName(lane); err != nil {
		return fmt.Errorf("lane: %w", err)
	}
	return nil
}

func (q Queue) must() Queue {
	if q.name == "" {
		panic("keys: zero Queue; build one with keys.NewQueue")
	}
	return q
}

// TopicChannel validates a topic name and returns its broadcast channel emq:{<topic>}:topic.
func TopicChannel(name string) (string, error) {
	if err := ValidateName(name); err != nil {
		return "", fmt.Errorf("topic: %w", err)
	}
	return busPrefix + "{" + name + "}:" + suffix[Topic], nil
}
