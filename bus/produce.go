package bus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
)

// NewJob is one job of [Bus.EnqueueBatch].
type NewJob struct {
	Payload []byte
	// UniqueKey is an optional idempotency key (1 to 512 bytes, no control bytes): while its
	// guard lives (EnqueueOpts.UniqueTTL), a second enqueue with the same key adds nothing and
	// answers the first job's id.
	UniqueKey string
}

// EnqueueOpts are the options of [Bus.Enqueue] and [Bus.EnqueueBatch]; nil means defaults.
type EnqueueOpts struct {
	// At schedules the jobs to run at this time (read by the client's clock, compared with
	// the server's). A time not later than the server's clock means now.
	At time.Time
	// Delay schedules the jobs to run this long after the server's clock at the call; it is
	// ignored when At is set. Zero means now.
	Delay time.Duration
	// UniqueKey is the idempotency key of the job of [Bus.Enqueue]; EnqueueBatch takes one per
	// job in [NewJob] and refuses this field.
	UniqueKey string
	// UniqueTTL is how long the keys of this call keep answering. Default Config.UniqueTTL.
	UniqueTTL time.Duration
	// Ack is the durability the call waits for. Default Primary.
	Ack Ack
	// Lane is the lane of the call's jobs: a name by the rule of names (1 to 64 bytes of
	// [A-Za-z0-9_.-]), or "" (the default) for none. A lane's jobs are claimed in mint order,
	// in turn with the other lanes that have waiting work, within the lane's limits (see
	// [Bus.SetLaneLimits]); the lane needs no declaration.
	Lane string
	// Priority is the priority of the call's jobs: 0 (the default) to 3 ([MaxPriority]), the
	// most urgent. A job of a higher priority is claimed before any job of a lower one whose
	// lane could give it; within a priority, in mint order. Caps, rates and pauses still
	// apply to it.
	Priority int
}

// Enqueued is the outcome of one job of an enqueue.
type Enqueued struct {
	// ID is the job's id: the new job's, or, for a duplicate, the id its key already named.
	ID keys.JobID
	// Duplicate is true when the job's unique key already named a job: nothing was added.
	Duplicate bool
}

// Enqueue adds one job to queue: to pending, or to schedule when opts set a later run-at.
// Its id is minted here by [keys.NewJobID]. On an *[AckError] the returned Enqueued is still
// valid: the job was added on the primary.
func (b *Bus) Enqueue(ctx context.Context, queue string, payload []byte, opts *EnqueueOpts) (Enqueued, error) {
	var o EnqueueOpts
	if opts != nil {
		o = *opts
	}
	key := o.UniqueKey
	o.UniqueKey = ""
	out, err := b.EnqueueBatch(ctx, queue, []NewJob{{Payload: payload, UniqueKey: key}}, &o)
	if len(out) == 0 {
		return Enqueued{}, err
	}
	return out[0], err
}

// EnqueueBatch adds jobs to queue in one round trip, all or nothing: every check (names,
// payload sizes, keys, key types) happens before anything is written, so an error means no
// job was added, except an *[AckError], which comes with the outcome of every job. A batch
// holds at most [MaxBatch] jobs.
func (b *Bus) EnqueueBatch(ctx context.Context, queue string, jobs []NewJob, opts *EnqueueOpts) ([]Enqueued, error) {
	const op = "enqueue"
	var o EnqueueOpts
	if opts != nil {
		o = *opts
	}
	q, err := b.queue(op, queue)
	if err != nil {
		return nil, err
	}
	if len(jobs) == 0 {
		return nil, fmt.Errorf("%w: %s in queue %s: no jobs", ErrInvalid, op, queue)
	}
	if len(jobs) > MaxBatch {
		return nil, fmt.Errorf("%w: %s in queue %s: %d jobs; a batch holds at most %d (MaxBatch): split it", ErrInvalid, op, queue, len(jobs), MaxBatch)
	}
	if o.UniqueKey != "" {
		return nil, fmt.Errorf("%w: %s in queue %s: EnqueueOpts.UniqueKey is for Enqueue; a batch takes NewJob.UniqueKey", ErrInvalid, op, queue)
	}
	if err := negativeOpt(op, queue, "EnqueueOpts.Delay", o.Delay); err != nil {
		return nil, err
	}
	if err := negativeOpt(op, queue, "EnqueueOpts.UniqueTTL", o.UniqueTTL); err != nil {
		return nil, err
	}
	var at int64
	if !o.At.IsZero() {
		at = max(o.At.UnixMilli(), 1) // rounded down (see msCeil); 0 means "not given" to the script
	}
	ttl := o.UniqueTTL
	if ttl == 0 {
		ttl = b.cfg.UniqueTTL
	}
	if o.Priority < 0 || o.Priority > MaxPriority {
		return nil, fmt.Errorf("%w: %s in queue %s: EnqueueOpts.Priority %d; a priority is 0 to %d", ErrInvalid, op, queue, o.Priority, MaxPriority)
	}
	if o.Lane != "" {
		if err := laneArg(op, queue, o.Lane); err != nil {
			return nil, err
		}
	}
	script, plain := scEnqueue, 4
	if o.Lane != "" || o.Priority > 0 {
		script, plain = scLaneEnqueue, 6
	}
	args := make([]string, plain, plain+3*len(jobs))
	args[0], args[1], args[2], args[3] = itoa(at), itoa(msCeil(o.Delay)), itoa(msCeil(ttl)), itoa(int64(b.cfg.MaxPayload))
	if plain == 6 {
		args[4], args[5] = o.Lane, itoa(int64(o.Priority))
	}
	for i, j := range jobs {
		if len(j.Payload) > b.cfg.MaxPayload {
			return nil, fmt.Errorf("%w: %s in queue %s: job %d has %d bytes, the limit is %d", ErrTooLarge, op, queue, i, len(j.Payload), b.cfg.MaxPayload)
		}
		if j.UniqueKey != "" {
			if err := keys.ValidateID(j.UniqueKey); err != nil {
				return nil, invalid(op+" in queue "+queue+": unique key", err)
			}
		}
		args = append(args, keys.NewJobID().String(), string(j.Payload), j.UniqueKey)
	}
	msg, err := b.exec(ctx, lua.Run{Script: script, Keys: keysOf(script, q), Args: args}, &o.Ack)
	if script == scLaneEnqueue && (err == nil || errors.Is(err, ErrNotDurable)) {
		b.noteFlow(queue, true)
	}
	if err != nil && !errors.Is(err, ErrNotDurable) {
		return nil, errorFor(call{op: op, queue: queue}, err)
	}
	arr, aerr := msg.ToArray()
	if aerr != nil || len(arr) != len(jobs) {
		return nil, protocolError(op, "reply %v", msg)
	}
	out := make([]Enqueued, len(arr))
	for i, e := range arr {
		pair, perr := e.ToArray()
		if perr != nil || len(pair) != 2 {
			return nil, protocolError(op, "reply entry %v", e)
		}
		s, _ := pair[0].ToString()
		id, perr := keys.ParseJobID(s)
		if perr != nil {
			return nil, protocolError(op, "reply id %q: %v", s, perr)
		}
		created, _ := pair[1].AsInt64()
		out[i] = Enqueued{ID: id, Duplicate: created == 0}
	}
	return out, b.listAfter(ctx, q, errorFor(call{op: op, queue: queue}, err))
}
