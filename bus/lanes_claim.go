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

// Claims of queues with lanes. claim answers EMQLANES for a queue that keeps lane state (a
// job with a lane or a priority, a queue rate, a lane in the round robin); laneclaim claims it
// then, and says in its reply whether the queue still keeps any. The Bus remembers which
// queues do, so that their claims go to laneclaim at once.

// usesFlow reports whether queue was last seen keeping lane state.
func (b *Bus) usesFlow(queue string) bool {
	_, ok := b.flow.Load(queue)
	return ok
}

// noteFlow records what a reply said of queue's lane state.
func (b *Bus) noteFlow(queue string, on bool) {
	if on {
		if _, loaded := b.flow.LoadOrStore(queue, struct{}{}); !loaded && b.flowCount.Add(1) > maxCachedQueues {
			b.flow.Delete(queue) // bounded like the queue cache: past it, claims learn by EMQLANES
			b.flowCount.Add(-1)
		}
		return
	}
	if _, loaded := b.flow.LoadAndDelete(queue); loaded {
		b.flowCount.Add(-1)
	}
}

// laneClaimRun is r, a claim's run, sent to laneclaim: the same arguments.
func laneClaimRun(q keys.Queue, r lua.Run) lua.Run {
	return lua.Run{Script: scLaneClaim, Keys: keysOf(scLaneClaim, q), Args: r.Args}
}

// laneReply is a laneclaim reply: {flow, wait_ms, paused, retired, refused, id, payload,
// attempts, lane, ...}.
type laneReply struct {
	flow, paused bool
	// wait is how long until a held-back lane may give work: negative when none is held, 0
	// when the call stopped at its bound and another claim should follow at once.
	wait             time.Duration
	retired, refused valkey.ValkeyMessage // completemany's reply for the finished jobs
	claimed          []valkey.ValkeyMessage
}

func parseLaneReply(msg valkey.ValkeyMessage) (laneReply, error) {
	const op = "laneclaim"
	arr, err := msg.ToArray()
	if err != nil || len(arr) < 5 || (len(arr)-5)%4 != 0 {
		return laneReply{}, protocolError(op, "reply %v", msg)
	}
	flow, ferr := arr[0].AsInt64()
	w, werr := arr[1].AsInt64()
	paused, perr := arr[2].AsInt64()
	if ferr != nil || werr != nil || perr != nil {
		return laneReply{}, protocolError(op, "reply %v", msg)
	}
	r := laneReply{flow: flow == 1, paused: paused == 1, wait: -1, retired: arr[3], refused: arr[4], claimed: arr[5:]}
	if w >= 0 {
		r.wait = time.Duration(w) * time.Millisecond
	}
	return r, nil
}

// jobs reads the claimed quadruples, calling each for every job with the id as the server
// spelled it.
func (r laneReply) jobs(q keys.Queue, each func(j Job, id string)) error {
	const op = "laneclaim"
	a := r.claimed
	for i := 0; i < len(a); i += 4 {
		s, _ := a[i].ToString()
		id, perr := keys.ParseJobID(s)
		if perr != nil {
			return protocolError(op, "reply id %q: %v", s, perr)
		}
		payload, _ := a[i+1].AsBytes()
		token, terr := a[i+2].AsInt64()
		lane, lerr := a[i+3].ToString()
		if terr != nil || lerr != nil {
			return protocolError(op, "reply token %v, lane %v", a[i+2], a[i+3])
		}
		each(Job{Queue: q.Name(), ID: id, Token: token, Payload: payload, Lane: lane}, s)
	}
	return nil
}

// laneClaimed decodes the reply of a laneclaim without finished jobs and notes the queue's
// lane state.
func (b *Bus) laneClaimed(q keys.Queue, msg valkey.ValkeyMessage, err error) (jobs []Job, wait time.Duration, _ error) {
	const op = "claim"
	if err != nil && !errors.Is(err, ErrNotDurable) {
		return nil, -1, errorFor(call{op: op, queue: q.Name()}, err)
	}
	r, perr := parseLaneReply(msg)
	if perr != nil {
		return nil, -1, perr
	}
	b.noteFlow(q.Name(), r.flow)
	jobs = []Job{}
	if perr := r.jobs(q, func(j Job, _ string) { jobs = append(jobs, j) }); perr != nil {
		return nil, -1, perr
	}
	return jobs, r.wait, errorFor(call{op: op, queue: q.Name()}, err)
}

// claimAny runs a claim of q for count jobs: laneclaim when q keeps lane state, else claim,
// and laneclaim after all when claim answers EMQLANES.
func (b *Bus) claimAny(ctx context.Context, q keys.Queue, r lua.Run, count int, ack *Ack) ([]Job, time.Duration, error) {
	if !b.usesFlow(q.Name()) {
		msg, err := b.exec(ctx, r, ack)
		jobs, err := claimed(q, msg, err)
		if !errors.Is(err, errFlowControl) {
			return jobs, -1, err
		}
		b.noteFlow(q.Name(), true)
	}
	run := laneClaimRun(q, r)
	msg, err := b.exec(ctx, run, ack)
	jobs, wait, err := b.laneClaimed(q, msg, err)
	if err != nil {
		return jobs, wait, err
	}
	return b.claimRest(ctx, q, run, count, ack, jobs, wait)
}

// maxClaimCalls bounds the laneclaim calls of one Claim: see claimRest.
const maxClaimCalls = 16

// claimRest completes a laneclaim of count jobs (run, without finished jobs) that claimed jobs
// and answered wait. A laneclaim that stops at its bound (wait 0) may claim fewer jobs than
// asked, none even, while jobs wait: a lane it counted on had fewer jobs than it assumed, or
// its visits ran out on lanes that could not give work, which it took out of the round robin.
// So while wait is 0 and jobs are missing, it claims the rest at once, up to maxClaimCalls
// calls in all; each call takes lanes that cannot give work out of the round robin, so the
// calls make progress. A later call's error ends the claim: with the jobs claimed so far and no
// error when there are any (they are the caller's; the error is the next claim's to meet), else
// with the error; an *[AckError] comes with the jobs.
func (b *Bus) claimRest(ctx context.Context, q keys.Queue, run lua.Run, count int, ack *Ack, jobs []Job, wait time.Duration) ([]Job, time.Duration, error) {
	run.Args = append([]string(nil), run.Args[:3]...) // the lease, the count, the promote limit
	for calls := 1; wait == 0 && len(jobs) < count && calls < maxClaimCalls; calls++ {
		run.Args[1] = itoa(int64(count - len(jobs)))
		msg, err := b.exec(ctx, run, ack)
		more, w, err := b.laneClaimed(q, msg, err)
		jobs, wait = append(jobs, more...), w
		if err != nil {
			var ae *AckError
			if errors.As(err, &ae) || len(jobs) == 0 {
				return jobs, wait, err
			}
			return jobs, -1, nil
		}
	}
	return jobs, wait, nil
}

// laneCompleteAndClaim is [Bus.CompleteAndClaim] for a queue with lane state: one laneclaim
// retires j and claims.
func (b *Bus) laneCompleteAndClaim(ctx context.Context, q keys.Queue, j Job, cr lua.Run, count int, ack *Ack) ([]Job, error) {
	r := laneClaimRun(q, cr)
	r.Args = append(append([]string(nil), r.Args...), j.ID.String(), itoa(j.Token))
	msg, err := b.exec(ctx, r, ack)
	if err != nil && !errors.Is(err, ErrNotDurable) {
		return nil, errorFor(call{op: "complete", queue: q.Name(), id: j.ID, token: j.Token}, err)
	}
	lr, perr := parseLaneReply(msg)
	if perr != nil {
		return nil, perr
	}
	b.noteFlow(q.Name(), lr.flow)
	refused, perr := completeManyReply(q.Name(), []Job{j}, lr.retired, lr.refused)
	if perr != nil {
		return nil, perr
	}
	var cerr error
	if len(refused) > 0 {
		cerr = refused[0]
	}
	if lr.paused {
		return nil, errors.Join(cerr, fmt.Errorf("%w: claim in queue %s", ErrPaused, q.Name()))
	}
	jobs := []Job{}
	if perr := lr.jobs(q, func(j Job, _ string) { jobs = append(jobs, j) }); perr != nil {
		return nil, perr
	}
	if err == nil {
		jobs, _, err = b.claimRest(ctx, q, laneClaimRun(q, cr), count, ack, jobs, lr.wait)
	}
	return jobs, errors.Join(cerr, errorFor(call{op: "claim", queue: q.Name()}, err))
}

// RateLimited hands a claimed job back because the service it calls refused it for now:
// the job waits again at once, this claim is refunded (it does not count toward MaxAttempts,
// and its attempts are not increased), and no job of its lane is claimed for d, fleet-wide
// (for a job without a lane: no job of the queue without a lane). It returns when the lane may
// give work again (server clock). It answers a *[StaleError] and changes nothing when j.Token
// no longer holds the job. A worker does this when a handler returns [RateLimited](d).
func (b *Bus) RateLimited(ctx context.Context, j Job, d time.Duration, opts *SnoozeOpts) (time.Time, error) {
	const op = "ratelimited"
	q, err := b.heldQueue(op, j)
	if err != nil {
		return time.Time{}, err
	}
	if d < 0 || d > MaxRateLimited {
		return time.Time{}, fmt.Errorf("%w: %s %s in queue %s: delay %v; 0 to %v", ErrInvalid, op, j.ID, j.Queue, d, MaxRateLimited)
	}
	var ack *Ack
	if opts != nil {
		ack = &opts.Ack
	}
	msg, err := b.exec(ctx, rateLimitedRun(q, j, d), ack)
	out, err := outcome(op, call{op, j.Queue, j.ID, j.Token}, msg, err)
	b.noteFlow(j.Queue, true)
	return out.At, err
}

func rateLimitedRun(q keys.Queue, j Job, d time.Duration) lua.Run {
	return lua.Run{Script: scRateLimited, Keys: keysOf(scRateLimited, q), Args: []string{j.ID.String(), itoa(j.Token), itoa(msCeil(d))}}
}
