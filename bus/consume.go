package bus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
)

// The consumer's side of a job: its states, the handle a claim returns, and the claim itself
// with the decoding of its reply. The verbs that end a claim (complete, fail, snooze) are in
// finish.go; extending a lease is in extend.go.

// State is the state field of a job row.
type State string

// The states of a job row. A row is in exactly the set its state names (Scheduled: schedule;
// Cancelling: active).
const (
	// StatePending: waiting in pending to be claimed.
	StatePending State = "pending"
	// StateActive: claimed, in active until its lease deadline.
	StateActive State = "active"
	// StateScheduled: waiting in schedule for its run-at (a delayed job, or a retry's
	// backoff).
	StateScheduled State = "scheduled"
	// StateDead: its attempts ran out, or it was refused a retry ([SkipRetry]) or cancelled
	// while claimed; in dead until retried or purged.
	StateDead State = "dead"
	// StateCancelling: claimed, and cancelled by [Bus.Cancel] since: still in active with its
	// lease, until its holder learns of it at its next heartbeat and fails it (or completes
	// it, having finished first), or its lease runs out; it then goes to dead (or is retired).
	StateCancelling State = "cancelling"
	// StateRetired is no row's state: [Bus.Lookup] answers it for a job retired with a result
	// that is still kept (its row is gone).
	StateRetired State = "retired"
)

// Job is a claimed job: the lease holder's handle for complete, fail, extend and snooze.
type Job struct {
	Queue string
	ID    keys.JobID
	// Token is the attempts count this claim minted (1 on the first claim). It fences every
	// later verb: once another claim mints a newer one, this holder's verbs answer ErrStale.
	Token   int64
	Payload []byte
	// Lane is the job's lane ("" for none), as the claim read it; see [EnqueueOpts.Lane].
	Lane string
}

// ClaimOpts are the options of [Bus.Claim]; nil means defaults.
type ClaimOpts struct {
	// Count is how many jobs to claim at most in this call: 1 to [MaxBatch]. Default 1.
	Count int
	// Lease is how long the jobs are leased, from the server's clock. Default Config.Lease.
	Lease time.Duration
	// PromoteLimit is how many due scheduled jobs to promote before claiming. Default
	// Config.PromoteLimit; negative: none.
	PromoteLimit int
	// Ack is the durability the call waits for (a Replicated claim survives a failover with
	// its token minted). Default Primary.
	Ack Ack
}

// Claim leases up to opts.Count pending jobs of queue, oldest (lex-least id) first, after
// promoting due scheduled jobs. It returns no jobs and no error when nothing is pending, and
// [ErrPaused] when the queue is paused. On an *[AckError] the returned jobs are claimed.
//
// In a queue with lanes, priorities or a rate (see [EnqueueOpts.Lane]) the claim takes the
// jobs of the highest priority first, then serves the lanes with waiting work in round robin,
// each within its limits, so one claim may span lanes; FIFO holds within a lane and a
// priority. Such a claim takes at most 1000 jobs. One laneclaim call may stop short at its
// bound (a lane gave fewer jobs than its turn assumed, or its visits ran out on lanes that
// cannot give work, which it takes out of the round robin); Claim then claims the rest at
// once, up to 16 calls in all, so it returns fewer jobs than asked only when no more may be
// claimed now, or after those 16 calls.
func (b *Bus) Claim(ctx context.Context, queue string, opts *ClaimOpts) ([]Job, error) {
	q, r, count, err := b.claimRun(queue, opts)
	if err != nil {
		return nil, err
	}
	var ack *Ack
	if opts != nil {
		ack = &opts.Ack
	}
	jobs, _, err := b.claimAny(ctx, q, r, count, ack)
	return jobs, err
}

// claimRun is the claim script's run for opts, and how many jobs it asks for.
func (b *Bus) claimRun(queue string, opts *ClaimOpts) (keys.Queue, lua.Run, int, error) {
	const op = "claim"
	var o ClaimOpts
	if opts != nil {
		o = *opts
	}
	q, err := b.queue(op, queue)
	if err != nil {
		return q, lua.Run{}, 0, err
	}
	if o.Count < 0 || o.Count > MaxBatch {
		return q, lua.Run{}, 0, fmt.Errorf("%w: %s in queue %s: ClaimOpts.Count %d; a claim takes 1 to %d jobs (MaxBatch; 0 means 1)", ErrInvalid, op, queue, o.Count, MaxBatch)
	}
	if err := negativeOpt(op, queue, "ClaimOpts.Lease", o.Lease); err != nil {
		return q, lua.Run{}, 0, err
	}
	count := max(o.Count, 1)
	lease := o.Lease
	if lease == 0 {
		lease = b.cfg.Lease
	}
	promote := b.cfg.PromoteLimit
	if o.PromoteLimit != 0 {
		promote = scriptCount(o.PromoteLimit)
	}
	return q, lua.Run{Script: scClaim, Keys: keysOf(scClaim, q), Args: []string{itoa(msCeil(lease)), itoa(int64(count)), itoa(int64(promote))}}, count, nil
}

// claimed decodes a claim reply.
func claimed(q keys.Queue, msg valkey.ValkeyMessage, err error) ([]Job, error) {
	const op = "claim"
	if err != nil && !errors.Is(err, ErrNotDurable) {
		return nil, errorFor(call{op: op, queue: q.Name()}, err)
	}
	var jobs []Job
	if perr := parseClaimed(q, msg, func(j Job, _ string) { jobs = append(jobs, j) }); perr != nil {
		return nil, perr
	}
	if jobs == nil {
		jobs = []Job{}
	}
	return jobs, errorFor(call{op: op, queue: q.Name()}, err)
}

// parseClaimed reads the triples {id, payload, attempts, ...} of a claim reply (claim's, or
// completeclaim's claimed list), calling each for every job with the id as the server spelled
// it.
func parseClaimed(q keys.Queue, msg valkey.ValkeyMessage, each func(j Job, id string)) error {
	const op = "claim"
	arr, aerr := msg.ToArray()
	if aerr != nil || len(arr)%3 != 0 {
		return protocolError(op, "reply %v", msg)
	}
	for i := 0; i < len(arr); i += 3 {
		s, _ := arr[i].ToString()
		id, perr := keys.ParseJobID(s)
		if perr != nil {
			return protocolError(op, "reply id %q: %v", s, perr)
		}
		payload, _ := arr[i+1].AsBytes() // a nil payload (a damaged row) reads as empty
		token, terr := arr[i+2].AsInt64()
		if terr != nil {
			return protocolError(op, "reply token %v", arr[i+2])
		}
		each(Job{Queue: q.Name(), ID: id, Token: token, Payload: payload}, s)
	}
	return nil
}

// heldQueue validates the handle of a claimed job and returns its queue.
func (b *Bus) heldQueue(op string, j Job) (keys.Queue, error) {
	q, err := b.queue(op, j.Queue)
	if err != nil {
		return q, err
	}
	if _, err := q.Job(j.ID); err != nil { // the zero JobID: keys refuses it, as ErrInvalid
		return q, invalid(op+" in queue "+j.Queue, err)
	}
	if j.Token < 1 {
		return q, fmt.Errorf("%w: %s %s in queue %s: token %d; a claim mints tokens from 1", ErrInvalid, op, j.ID, j.Queue, j.Token)
	}
	return q, nil
}
