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

// The verbs that end a claim: complete (one job, many, or one with the next claim in the same
// round trip), fail and snooze, and the decoding of their replies. Claiming and the job's
// handle are in consume.go.

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
// whole (names, transport, an *[AckError]). One call retires at most [MaxBatch] jobs.
func (b *Bus) CompleteMany(ctx context.Context, jobs []Job, opts *CompleteOpts) ([]*StaleError, error) {
	const op = "complete"
	if len(jobs) == 0 {
		return nil, fmt.Errorf("%w: %s: no jobs", ErrInvalid, op)
	}
	if len(jobs) > MaxBatch {
		return nil, fmt.Errorf("%w: %s: %d jobs; one call retires at most %d (MaxBatch): split them", ErrInvalid, op, len(jobs), MaxBatch)
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
	_, cr, count, err := b.claimRun(j.Queue, opts)
	if err != nil {
		return nil, err
	}
	var ack *Ack
	if opts != nil {
		ack = &opts.Ack
	}
	if b.usesFlow(j.Queue) {
		return b.laneCompleteAndClaim(ctx, q, j, cr, count, ack) // one laneclaim retires and claims
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
		jobs, _, err = b.claimAny(ctx, q, cr, count, ack) // the queue has lanes: claim it through them
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
	args := []string{j.ID.String(), itoa(j.Token), itoa(msCeil(o.Backoff)), itoa(int64(scriptCount(o.MaxAttempts))), itoa(int64(b.cfg.MaxAttempts)), failureText(o.Error)}
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
