package bus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
)

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
	// Count is how many jobs to claim at most in this call. Default 1.
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
// priority. Such a claim takes at most 1000 jobs.
func (b *Bus) Claim(ctx context.Context, queue string, opts *ClaimOpts) ([]Job, error) {
	q, r, err := b.claimRun(queue, opts)
	if err != nil {
		return nil, err
	}
	var ack *Ack
	if opts != nil {
		ack = &opts.Ack
	}
	jobs, _, err := b.claimAny(ctx, q, r, ack)
	return jobs, err
}

func (b *Bus) claimRun(queue string, opts *ClaimOpts) (keys.Queue, lua.Run, error) {
	const op = "claim"
	var o ClaimOpts
	if opts != nil {
		o = *opts
	}
	q, err := b.queue(op, queue)
	if err != nil {
		return q, lua.Run{}, err
	}
	if o.Count < 0 {
		return q, lua.Run{}, fmt.Errorf("%w: %s in queue %s: ClaimOpts.Count %d must not be negative", ErrInvalid, op, queue, o.Count)
	}
	if err := negativeOpt(op, queue, "ClaimOpts.Lease", o.Lease); err != nil {
		return q, lua.Run{}, err
	}
	count := max(o.Count, 1)
	lease := o.Lease
	if lease == 0 {
		lease = b.cfg.Lease
	}
	promote := o.PromoteLimit
	switch {
	case promote == 0:
		promote = b.cfg.PromoteLimit
	case promote < 0:
		promote = 0
	}
	return q, lua.Run{Script: scClaim, Keys: keysOf(scClaim, q), Args: []string{itoa(msCeil(lease)), itoa(int64(count)), itoa(int64(promote))}}, nil
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

// CompleteOpts are the options of [Bus.Complete]; nil means defaults.
type CompleteOpts struct {
	// Ack is the durability the call waits for. Default Primary.
	Ack Ack
	// Result, with ResultTTL, is kept after the job is retired, for [Bus.Lookup] to read, at
	// most [MaxResultSize] bytes. Default none. [Bus.CompleteMany] refuses it.
	Result []byte
	// ResultTTL is how long the result is kept (whole milliseconds, rounded up). Default 0:
	// no result is kept, and nothing of the job remains.
	ResultTTL time.Duration
}

// Complete retires a claimed job: its row is deleted and nothing of it remains, unless
// opts ask to keep a result (ResultTTL > 0): then the result stays readable by [Bus.Lookup]
// until its TTL. A job cancelled while claimed ([StateCancelling]) is retired all the same:
// its work was done. It answers a *[StaleError] (ErrStale) and changes nothing when j.Token no
// longer holds the job.
func (b *Bus) Complete(ctx context.Context, j Job, opts *CompleteOpts) error {
	const op = "complete"
	q, err := b.heldQueue(op, j)
	if err != nil {
		return err
	}
	var ack *Ack
	var result []byte
	var ttl time.Duration
	if opts != nil {
		ack, result, ttl = &opts.Ack, opts.Result, opts.ResultTTL
	}
	if err := resultArgs(op, j, result, ttl); err != nil {
		return err
	}
	_, err = b.exec(ctx, b.completeRunWith(q, j, result, ttl), ack)
	return errorFor(call{op, j.Queue, j.ID, j.Token}, err)
}

func (b *Bus) completeRun(q keys.Queue, j Job) lua.Run { return b.completeRunWith(q, j, nil, 0) }

// completeRunWith is the complete of j, keeping result for ttl when ttl > 0.
func (b *Bus) completeRunWith(q keys.Queue, j Job, result []byte, ttl time.Duration) lua.Run {
	return lua.Run{Script: scComplete, Keys: keysOf(scComplete, q), Args: []string{j.ID.String(), itoa(j.Token), itoa(msCeil(ttl)), string(result)}}
}

// CompleteMany retires several claimed jobs of one queue in one call, each fenced by its own
// token as [Bus.Complete] is. It returns, for every job that was not retired, a
// *[StaleError] with the reason; those jobs were not written. The error is for the call as a
// whole (names, transport, an *[AckError]).
func (b *Bus) CompleteMany(ctx context.Context, jobs []Job, opts *CompleteOpts) ([]*StaleError, error) {
	const op = "complete"
	if len(jobs) == 0 {
		return nil, fmt.Errorf("%w: %s: no jobs", ErrInvalid, op)
	}
	var q keys.Queue
	for i, j := range jobs {
		jq, err := b.heldQueue(op, j)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			q = jq
		} else if j.Queue != jobs[0].Queue {
			return nil, fmt.Errorf("%w: %s: jobs of queues %s and %s in one call; complete each queue apart", ErrInvalid, op, jobs[0].Queue, j.Queue)
		}
	}
	var ack *Ack
	if opts != nil {
		if opts.Result != nil || opts.ResultTTL != 0 {
			return nil, fmt.Errorf("%w: %s: CompleteMany keeps no results; complete a job with a result by Complete", ErrInvalid, op)
		}
		ack = &opts.Ack
	}
	msg, err := b.exec(ctx, completeManyRun(q, jobs), ack)
	c := call{op: op, queue: q.Name()}
	if err != nil && !errors.Is(err, ErrNotDurable) {
		return nil, errorFor(c, err)
	}
	refused, perr := completeManyReplyOf(q.Name(), jobs, msg)
	if perr != nil {
		return nil, perr
	}
	return refused, errorFor(c, err)
}

func completeManyRun(q keys.Queue, jobs []Job) lua.Run {
	args := make([]string, 0, 2*len(jobs))
	for _, j := range jobs {
		args = append(args, j.ID.String(), itoa(j.Token))
	}
	return lua.Run{Script: scCompleteMany, Keys: keysOf(scCompleteMany, q), Args: args}
}

// completeManyReply decodes {retired, refused}, refused naming jobs by position: the reply of
// completemany, or the first two elements of completeclaim's.
func completeManyReply(queue string, jobs []Job, retiredMsg, refusedMsg valkey.ValkeyMessage) ([]*StaleError, error) {
	retired, err := retiredMsg.AsInt64()
	flat, ferr := refusedMsg.ToArray()
	if err != nil || ferr != nil || len(flat)%2 != 0 || int(retired)+len(flat)/2 != len(jobs) {
		return nil, protocolError("completemany", "reply {%v, %v}", retiredMsg, refusedMsg)
	}
	var refused []*StaleError
	for i := 0; i < len(flat); i += 2 {
		pos, perr := flat[i].AsInt64()
		reason, rerr := flat[i+1].ToString()
		if perr != nil || rerr != nil || pos < 1 || int(pos) > len(jobs) {
			return nil, protocolError("completemany", "reply {%v, %v}", retiredMsg, refusedMsg)
		}
		j := jobs[pos-1]
		reason, _ = strings.CutPrefix(reason, "EMQSTALE ")
		refused = append(refused, &StaleError{Op: "complete", Queue: queue, ID: j.ID, Token: j.Token, Reason: StaleReason(reason)})
	}
	return refused, nil
}

// completeManyReplyOf decodes a completemany reply.
func completeManyReplyOf(queue string, jobs []Job, msg valkey.ValkeyMessage) ([]*StaleError, error) {
	arr, err := msg.ToArray()
	if err != nil || len(arr) != 2 {
		return nil, protocolError("completemany", "reply %v", msg)
	}
	return completeManyReply(queue, jobs, arr[0], arr[1])
}

// CompleteAndClaim completes j and claims the next jobs of j's queue in one round trip (two
// scripts pipelined on one connection, in that order). The claim runs even when the complete
// is refused: the jobs are returned together with the complete's error, so a worker keeps
// its new work and learns that its old lease was lost.
func (b *Bus) CompleteAndClaim(ctx context.Context, j Job, opts *ClaimOpts) ([]Job, error) {
	const op = "complete"
	q, err := b.heldQueue(op, j)
	if err != nil {
		return nil, err
	}
	_, cr, err := b.claimRun(j.Queue, opts)
	if err != nil {
		return nil, err
	}
	var ack *Ack
	if opts != nil {
		ack = &opts.Ack
	}
	if b.usesFlow(j.Queue) {
		return b.laneCompleteAndClaim(ctx, q, j, cr, ack) // one laneclaim retires and claims
	}
	out, ackErr := b.execMulti(ctx, []lua.Run{b.completeRun(q, j), cr}, ack)
	if len(out) != 2 {
		return nil, fmt.Errorf("bus: complete and claim in queue %s: %w", j.Queue, ackErr)
	}
	cerr := errorFor(call{op, j.Queue, j.ID, j.Token}, out[0].err)
	if out[1].err == nil {
		// The claim ran: its reply comes with the ack's error, which covers both scripts.
		jobs, err := claimed(q, out[1].msg, ackErr)
		return jobs, errors.Join(cerr, err)
	}
	// The claim was refused (and wrote nothing): its own error decides, and the ack's error,
	// which then covers the complete alone, is reported beside it.
	jobs, err := claimed(q, out[1].msg, out[1].err)
	if errors.Is(err, errFlowControl) {
		jobs, _, err = b.claimAny(ctx, q, cr, ack) // the queue has lanes: claim it through them
	}
	return jobs, errors.Join(cerr, err, ackErr)
}

// FailOpts are the options of [Bus.Fail]; nil means defaults.
type FailOpts struct {
	// Backoff is how long the job waits in schedule before it is claimable again, from the
	// server's clock. Zero sends it back to pending at once. The worker runtime adds jitter.
	Backoff time.Duration
	// MaxAttempts, when > 0, overrides the queue's maximum for this call: the job goes to
	// dead when its token (attempts) has reached it. 1 sends it to dead at once.
	MaxAttempts int
	// Error is the attempt's error text, recorded in the job's failure history (see
	// [JobInfo].Failures), cut to [MaxFailureText] bytes on a UTF-8 boundary. Default "": the
	// attempt is recorded with an empty text.
	Error string
	// Ack is the durability the call waits for. Default Primary.
	Ack Ack
}

// Outcome says where a job went.
type Outcome struct {
	State State     // StatePending, StateScheduled or StateDead
	At    time.Time // the run-at when scheduled; the server's clock at the call otherwise
}

// Fail hands a claimed job back after a failed attempt: into schedule after opts.Backoff, or
// into dead when its attempts reached the maximum (opts.MaxAttempts, else the queue's, see
// [Bus.SetMaxAttempts], else Config.MaxAttempts). The attempt, its server time and
// opts.Error join the job's failure history (the last [MaxFailures] are kept). A job
// cancelled while claimed ([StateCancelling]) goes to dead whatever the options, its history
// saying "cancelled". It answers a *[StaleError] and changes nothing when j.Token no longer
// holds the job.
func (b *Bus) Fail(ctx context.Context, j Job, opts *FailOpts) (Outcome, error) {
	const op = "fail"
	var o FailOpts
	if opts != nil {
		o = *opts
	}
	q, err := b.heldQueue(op, j)
	if err != nil {
		return Outcome{}, err
	}
	if err := negativeOpt(op+" "+j.ID.String(), j.Queue, "FailOpts.Backoff", o.Backoff); err != nil {
		return Outcome{}, err
	}
	if o.MaxAttempts < 0 {
		return Outcome{}, fmt.Errorf("%w: %s %s in queue %s: FailOpts.MaxAttempts %d must not be negative", ErrInvalid, op, j.ID, j.Queue, o.MaxAttempts)
	}
	args := []string{j.ID.String(), itoa(j.Token), itoa(msCeil(o.Backoff)), itoa(int64(o.MaxAttempts)), itoa(int64(b.cfg.MaxAttempts)), failureText(o.Error)}
	msg, err := b.exec(ctx, lua.Run{Script: scFail, Keys: keysOf(scFail, q), Args: args}, &o.Ack)
	return outcome(op, call{op, j.Queue, j.ID, j.Token}, msg, err)
}

// outcome decodes a {where, at_ms} reply.
func outcome(op string, c call, msg valkey.ValkeyMessage, err error) (Outcome, error) {
	if err != nil && !errors.Is(err, ErrNotDurable) {
		return Outcome{}, errorFor(c, err)
	}
	arr, aerr := msg.ToArray()
	if aerr != nil || len(arr) != 2 {
		return Outcome{}, protocolError(op, "reply %v", msg)
	}
	where, _ := arr[0].ToString()
	at, _ := arr[1].AsInt64()
	return Outcome{State: State(where), At: time.UnixMilli(at)}, errorFor(c, err)
}

// SnoozeOpts are the options of [Bus.Snooze]; nil means defaults.
type SnoozeOpts struct {
	// Ack is the durability the call waits for. Default Primary.
	Ack Ack
}

// Snooze hands a claimed job back without counting a failure: into schedule for delay (from
// the server's clock), or into pending at once when delay is 0. It is never sent to dead.
// attempts is kept: it is the fencing token and never goes down, so the next claim mints
// Token+1; since attempts counts claims, snoozes count toward the maximum of later failures.
// It answers a *[StaleError] and changes nothing when j.Token no longer holds the job.
func (b *Bus) Snooze(ctx context.Context, j Job, delay time.Duration, opts *SnoozeOpts) (Outcome, error) {
	const op = "snooze"
	q, err := b.heldQueue(op, j)
	if err != nil {
		return Outcome{}, err
	}
	if delay < 0 {
		return Outcome{}, fmt.Errorf("%w: %s %s in queue %s: negative delay", ErrInvalid, op, j.ID, j.Queue)
	}
	var ack *Ack
	if opts != nil {
		ack = &opts.Ack
	}
	msg, err := b.exec(ctx, lua.Run{Script: scSnooze, Keys: keysOf(scSnooze, q), Args: []string{j.ID.String(), itoa(j.Token), itoa(msCeil(delay))}}, ack)
	return outcome(op, call{op, j.Queue, j.ID, j.Token}, msg, err)
}
