package bus

import (
	"context"
	"time"

	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
)

// JobInfo is one job as [Bus.Lookup] reads it.
type JobInfo struct {
	ID       keys.JobID
	State    State
	Attempts int64
	Payload  []byte
	// Set is the set that holds the id: keys.Pending, keys.Active, keys.Schedule, keys.Dead,
	// keys.LanePending (a waiting job of a lane) or keys.Urgent (a waiting job of priority 1
	// and above); 0 when none does (which the scripts never leave behind).
	Set keys.Type
	// At is the lease deadline when active or cancelling, the run-at when scheduled and the
	// completion time when retired (server clock); zero otherwise.
	At time.Time
	// Failures is the job's failure history, oldest first: its last [MaxFailures] failed
	// attempts (a handler's error, FailOpts.Error, [LeaseExpired], or "cancelled"), read in
	// the same snapshot as the row. Empty when the job never failed. Retrying a dead job keeps
	// it.
	Failures []Failure
	// Result is the result of a job retired with one (State is [StateRetired]); nil
	// otherwise.
	Result []byte
	// Lane and Priority are the job's, as enqueued ("" and 0 for none, and for a retired
	// job).
	Lane     string
	Priority int
	// Refunds is how many of its claims a [RateLimited] handed back: they do not count
	// toward its maximum of attempts.
	Refunds int64
}

// Lookup reads one job of queue: its row, the set that holds it and its failure history, in
// one atomic snapshot. A job retired with a result that is still kept (see
// [CompleteOpts].ResultTTL, [HandlerOpts].ResultTTL) answers State [StateRetired], Attempts
// its completing token, At its completion time and its Result. Lookup answers
// [ErrNotFound] when the job has no row and no result (never enqueued, completed without a
// result or past its TTL, cancelled or purged).
func (b *Bus) Lookup(ctx context.Context, queue string, id keys.JobID) (JobInfo, error) {
	const op = "lookup"
	q, err := b.queue(op, queue)
	if err != nil {
		return JobInfo{}, err
	}
	if _, err := q.Job(id); err != nil { // the zero JobID: keys refuses it, as ErrInvalid
		return JobInfo{}, invalid(op+" in queue "+queue, err)
	}
	msg, err := b.exec(ctx, lua.Run{Script: scLookup, Keys: keysOf(scLookup, q), Args: []string{id.String()}}, nil)
	if err != nil {
		return JobInfo{}, errorFor(call{op: op, queue: queue, id: id}, err)
	}
	arr, err := msg.ToArray()
	if err != nil || len(arr) != 10 {
		return JobInfo{}, protocolError(op, "reply %v", msg)
	}
	info := JobInfo{ID: id}
	state, _ := arr[0].ToString()
	info.State = State(state)
	info.Attempts, _ = arr[1].AsInt64()
	info.Payload, _ = arr[2].AsBytes()
	set, _ := arr[3].ToString()
	switch set {
	case "pending":
		info.Set = keys.Pending
	case "active":
		info.Set = keys.Active
	case "schedule":
		info.Set = keys.Schedule
	case "dead":
		info.Set = keys.Dead
	case "lanepending":
		info.Set = keys.LanePending
	case "urgent":
		info.Set = keys.Urgent // its score is minus the priority: no time
	}
	if score, _ := arr[4].AsInt64(); score != 0 && info.Set != keys.Urgent {
		info.At = time.UnixMilli(score)
	}
	info.Lane, _ = arr[7].ToString()
	prio, _ := arr[8].AsInt64()
	info.Priority = int(prio)
	info.Refunds, _ = arr[9].AsInt64()
	entries, err := arr[5].AsStrSlice()
	if err != nil {
		return JobInfo{}, protocolError(op, "reply %v", msg)
	}
	if info.Failures, err = parseFailures(op, entries); err != nil {
		return JobInfo{}, err
	}
	if info.State == StateRetired {
		info.Payload = nil
		if info.Result, err = arr[6].AsBytes(); err != nil {
			return JobInfo{}, protocolError(op, "reply %v", msg)
		}
		if info.Result == nil {
			info.Result = []byte{}
		}
	}
	return info, nil
}
