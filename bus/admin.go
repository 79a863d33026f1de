package bus

import (
	"context"
	"fmt"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
)

// PromoteOpts are the options of [Bus.Promote]; nil means defaults.
type PromoteOpts struct {
	// Limit bounds how many jobs one call moves. Default 100 ([DefaultLimit]).
	Limit int
}

// Promote moves due scheduled jobs of queue (run-at not later than the server's clock) to
// pending, oldest run-at first, at most opts.Limit of them, and returns their ids. Any number
// of processes may run it at once: each job moves once. Call it until it returns fewer ids
// than the limit to drain a backlog.
func (b *Bus) Promote(ctx context.Context, queue string, opts *PromoteOpts) ([]keys.JobID, error) {
	const op = "promote"
	q, err := b.queue(op, queue)
	if err != nil {
		return nil, err
	}
	limit, err := limitOf(op, queue, opts != nil, func() int { return opts.Limit })
	if err != nil {
		return nil, err
	}
	msg, err := b.exec(ctx, lua.Run{Script: scPromote, Keys: keysOf(scPromote, q), Args: []string{itoa(int64(limit))}}, nil)
	if err != nil {
		return nil, errorFor(call{op: op, queue: queue}, err)
	}
	return jobIDs(op, msg)
}

// ReapOpts are the options of [Bus.Reap]; nil means defaults.
type ReapOpts struct {
	// Limit bounds how many jobs one call moves. Default 100 ([DefaultLimit]).
	Limit int
	// MaxAttempts, when > 0, overrides the queue's maximum for this call.
	MaxAttempts int
}

// Reaped is what one reap moved.
type Reaped struct {
	Requeued []keys.JobID // back to pending: their next claim mints a newer token
	Dead     []keys.JobID // their attempts had reached the maximum
}

// Reap recovers jobs of queue whose lease ran out (deadline not later than the server's
// clock), oldest deadline first, at most opts.Limit of them: back to pending, or to dead when
// their attempts reached the maximum. Any number of processes may run it at once: each job
// moves once. The holder whose lease ran out is fenced: the next claim mints a newer token.
func (b *Bus) Reap(ctx context.Context, queue string, opts *ReapOpts) (Reaped, error) {
	const op = "reap"
	q, err := b.queue(op, queue)
	if err != nil {
		return Reaped{}, err
	}
	limit, err := limitOf(op, queue, opts != nil, func() int { return opts.Limit })
	if err != nil {
		return Reaped{}, err
	}
	var maxAttempts int
	if opts != nil {
		if opts.MaxAttempts < 0 {
			return Reaped{}, fmt.Errorf("%w: %s in queue %s: negative MaxAttempts", ErrInvalid, op, queue)
		}
		maxAttempts = scriptCount(opts.MaxAttempts)
	}
	args := []string{itoa(int64(limit)), itoa(int64(maxAttempts)), itoa(int64(b.cfg.MaxAttempts))}
	msg, err := b.exec(ctx, lua.Run{Script: scReap, Keys: keysOf(scReap, q), Args: args}, nil)
	if err != nil {
		return Reaped{}, errorFor(call{op: op, queue: queue}, err)
	}
	return reapReply(msg)
}

// reapReply decodes a reap reply {requeued, dead}: two lists of JOB ids.
func reapReply(msg valkey.ValkeyMessage) (Reaped, error) {
	const op = "reap"
	arr, err := msg.ToArray()
	if err != nil || len(arr) != 2 {
		return Reaped{}, protocolError(op, "reply %v", msg)
	}
	var r Reaped
	if r.Requeued, err = jobIDs(op, arr[0]); err != nil {
		return Reaped{}, err
	}
	if r.Dead, err = jobIDs(op, arr[1]); err != nil {
		return Reaped{}, err
	}
	return r, nil
}

// limitOf reads an opts' Limit: zero means DefaultLimit.
func limitOf(op, queue string, set bool, get func() int) (int, error) {
	if !set {
		return DefaultLimit, nil
	}
	switch n := get(); {
	case n < 0:
		return 0, fmt.Errorf("%w: %s in queue %s: negative Limit", ErrInvalid, op, queue)
	case n > MaxBatch:
		return 0, fmt.Errorf("%w: %s in queue %s: Limit %d; one call takes at most %d (MaxBatch)", ErrInvalid, op, queue, n, MaxBatch)
	case n == 0:
		return DefaultLimit, nil
	default:
		return n, nil
	}
}

// jobIDs decodes a list of JOB ids (a promote or purge reply, a list of a reap reply).
func jobIDs(op string, msg valkey.ValkeyMessage) ([]keys.JobID, error) {
	ss, err := msg.AsStrSlice()
	if err != nil {
		return nil, protocolError(op, "reply %v", msg)
	}
	return parseJobIDs(op, ss)
}

// parseJobIDs parses the JOB ids of a reply.
func parseJobIDs(op string, ss []string) ([]keys.JobID, error) {
	out := make([]keys.JobID, len(ss))
	for i, s := range ss {
		var err error
		if out[i], err = keys.ParseJobID(s); err != nil {
			return nil, protocolError(op, "reply id %q: %v", s, err)
		}
	}
	return out, nil
}

// Pause stops queue from handing out work: claims answer [ErrPaused] until [Bus.Resume].
// Producers may still enqueue, and promote and reap still run. Pausing a paused queue is not
// an error.
func (b *Bus) Pause(ctx context.Context, queue string) error {
	const op = "pause"
	q, err := b.queue(op, queue)
	if err != nil {
		return err
	}
	_, err = b.exec(ctx, lua.Run{Script: scPause, Keys: keysOf(scPause, q), Args: nil}, nil)
	return b.listAfter(ctx, q, errorFor(call{op: op, queue: queue}, err))
}

// Resume lets a paused queue hand out work again and wakes idle workers when jobs are
// pending. Resuming a running queue is not an error.
func (b *Bus) Resume(ctx context.Context, queue string) error {
	const op = "resume"
	q, err := b.queue(op, queue)
	if err != nil {
		return err
	}
	_, err = b.exec(ctx, lua.Run{Script: scResume, Keys: keysOf(scResume, q), Args: nil}, nil)
	return b.listAfter(ctx, q, errorFor(call{op: op, queue: queue}, err))
}

// SetMaxAttempts sets the queue's maximum of claims per job, which fail and reap use when the
// call names none; 0 clears it (Config.MaxAttempts applies again).
func (b *Bus) SetMaxAttempts(ctx context.Context, queue string, n int) error {
	const op = "configure"
	q, err := b.queue(op, queue)
	if err != nil {
		return err
	}
	if n < 0 || int64(n) > lua.MaxUint {
		return fmt.Errorf("%w: %s in queue %s: max attempts %d is not in [0, %d]", ErrInvalid, op, queue, n, int64(lua.MaxUint))
	}
	_, err = b.exec(ctx, lua.Run{Script: scConfigure, Keys: keysOf(scConfigure, q), Args: []string{itoa(int64(n)), ""}}, nil)
	return b.listAfter(ctx, q, errorFor(call{op: op, queue: queue}, err))
}

// SetDeadLimit bounds the queue's dead jobs: a job that dies (its attempts spent, its last
// lease run out, or cancelled while it ran) when dead holds more than n deletes the oldest
// other dead jobs (by mint order) for good, with their failure histories, so that dead keeps
// n jobs: the one that just died, whatever its age, and the n-1 newest others by mint order
// (an old job that dies after newer ones is deleted at a later death, not by its own). One death deletes at most 100 more than it adds: after a lower limit, dead
// shrinks over the deaths that follow ([Bus.PurgeDead] deletes at once). 0 clears the limit
// (the default): dead jobs are kept until they are retried or purged. n must be at most
// [lua.MaxUint].
func (b *Bus) SetDeadLimit(ctx context.Context, queue string, n int) error {
	const op = "configure"
	q, err := b.queue(op, queue)
	if err != nil {
		return err
	}
	if n < 0 || int64(n) > lua.MaxUint {
		return fmt.Errorf("%w: %s in queue %s: dead limit %d is not in [0, %d]", ErrInvalid, op, queue, n, int64(lua.MaxUint))
	}
	_, err = b.exec(ctx, lua.Run{Script: scConfigure, Keys: keysOf(scConfigure, q), Args: []string{"", itoa(int64(n))}}, nil)
	return b.listAfter(ctx, q, errorFor(call{op: op, queue: queue}, err))
}

// jobArg validates a job id argument.
func jobArg(op, queue string, id keys.JobID) error {
	if id.IsZero() {
		return fmt.Errorf("%w: %s in queue %s: the zero JobID is not branded", ErrInvalid, op, queue)
	}
	return nil
}

// Cancel cancels a job and returns the state it had. A waiting job (StatePending or
// StateScheduled) is deleted at once, its failure history with it. A claimed one (StateActive)
// is cancelled cooperatively: its row's state becomes [StateCancelling] and nothing else
// changes; the holder's next heartbeat is refused, a [Worker] then cancels the handler's
// context with the cause [ErrCancelled] (or, when the job still waits in its prefetch buffer,
// never runs it), and the job goes to dead with the failure "cancelled", without a retry (a
// handler that returns nil before it notices completes the job). A holder that is gone leaves
// it to its lease: reap sends it to dead. Cancelling a job that is cancelling already answers
// StateCancelling and changes nothing. A dead job is not cancelled (a *[StateError]): purge it
// with [Bus.PurgeDead]. An idempotency key that named the job keeps answering its id until the
// key's TTL.
func (b *Bus) Cancel(ctx context.Context, queue string, id keys.JobID) (State, error) {
	const op = "cancel"
	q, err := b.queue(op, queue)
	if err != nil {
		return "", err
	}
	if err := jobArg(op, queue, id); err != nil {
		return "", err
	}
	msg, err := b.exec(ctx, lua.Run{Script: scCancel, Keys: keysOf(scCancel, q), Args: []string{id.String()}}, nil)
	if err != nil {
		return "", errorFor(call{op: op, queue: queue, id: id}, err)
	}
	s, err := msg.ToString()
	if err != nil {
		return "", protocolError(op, "reply %v", msg)
	}
	return State(s), nil
}

// RetryDead brings dead jobs back to pending, all or nothing, and returns how many moved.
// attempts is kept (it only grows), so a job retried after reaching the maximum goes back to
// dead on its next failure unless the maximum is raised.
func (b *Bus) RetryDead(ctx context.Context, queue string, ids ...keys.JobID) (int, error) {
	const op = "retry"
	q, err := b.queue(op, queue)
	if err != nil {
		return 0, err
	}
	if len(ids) == 0 || len(ids) > MaxBatch {
		return 0, fmt.Errorf("%w: %s in queue %s: %d ids; one call takes 1 to %d (MaxBatch)", ErrInvalid, op, queue, len(ids), MaxBatch)
	}
	args := make([]string, len(ids))
	for i, id := range ids {
		if err := jobArg(op, queue, id); err != nil {
			return 0, err
		}
		args[i] = id.String()
	}
	msg, err := b.exec(ctx, lua.Run{Script: scRetry, Keys: keysOf(scRetry, q), Args: args}, nil)
	if err != nil {
		return 0, errorFor(call{op: op, queue: queue}, err)
	}
	n, err := msg.AsInt64()
	if err != nil {
		return 0, protocolError(op, "reply %v", msg)
	}
	return int(n), nil
}

// PurgeOpts are the options of [Bus.PurgeDead]; nil means defaults.
type PurgeOpts struct {
	// IDs, when not nil, names the dead jobs to delete, all or nothing; Limit is then
	// ignored. An empty, non-nil IDs is refused ([ErrInvalid]): it selects nothing, and must
	// not read as "the oldest".
	IDs []keys.JobID
	// Limit bounds how many of the oldest dead jobs one call deletes. Default 100
	// ([DefaultLimit]).
	Limit int
}

// PurgeDead deletes dead jobs for good (row and id) and returns their ids: opts.IDs, or else
// the oldest dead jobs up to opts.Limit. Call it until it returns no ids to empty dead.
func (b *Bus) PurgeDead(ctx context.Context, queue string, opts *PurgeOpts) ([]keys.JobID, error) {
	const op = "purge"
	q, err := b.queue(op, queue)
	if err != nil {
		return nil, err
	}
	byID := opts != nil && opts.IDs != nil
	switch {
	case byID && len(opts.IDs) == 0:
		return nil, fmt.Errorf("%w: %s in queue %s: PurgeOpts.IDs is empty; leave it nil to purge the oldest dead jobs", ErrInvalid, op, queue)
	case byID && len(opts.IDs) > MaxBatch:
		return nil, fmt.Errorf("%w: %s in queue %s: %d ids; one call takes at most %d (MaxBatch)", ErrInvalid, op, queue, len(opts.IDs), MaxBatch)
	}
	limit := 0
	if !byID {
		if limit, err = limitOf(op, queue, opts != nil, func() int { return opts.Limit }); err != nil {
			return nil, err
		}
	}
	args := []string{itoa(int64(limit))}
	if byID {
		for _, id := range opts.IDs {
			if err := jobArg(op, queue, id); err != nil {
				return nil, err
			}
			args = append(args, id.String())
		}
	}
	msg, err := b.exec(ctx, lua.Run{Script: scPurge, Keys: keysOf(scPurge, q), Args: args}, nil)
	if err != nil {
		return nil, errorFor(call{op: op, queue: queue}, err)
	}
	return jobIDs(op, msg)
}

// Counts is a queue's state, read in one atomic snapshot.
type Counts struct {
	// Pending is every waiting job: those without a lane, those in the lanes' sets (InLanes)
	// and those of priority 1 and above (Urgent).
	Pending, Active, Scheduled, Dead int64
	Paused                           bool
	// MaxAttempts is the queue's own maximum (see [Bus.SetMaxAttempts]); 0 when it has none.
	MaxAttempts int
	// DeadLimit is the most dead jobs the queue keeps (see [Bus.SetDeadLimit]); 0 when it
	// keeps them all.
	DeadLimit int
	// InLanes is how many jobs of priority 0 wait in the lanes' sets; Urgent, how many jobs
	// of priority 1 to 3 wait. Both are counted in Pending.
	InLanes, Urgent int64
	// LanesReady is how many lanes are in the round robin (the queue's own stream included,
	// when it competes with lanes); LanesHeld, how many are held back by a rate or a
	// RateLimited; LanesActive, how many have claimed jobs.
	LanesReady, LanesHeld, LanesActive int64
}

// Counts reads the sizes of queue's four sets and its meta in one atomic snapshot.
func (b *Bus) Counts(ctx context.Context, queue string) (Counts, error) {
	const op = "counts"
	q, err := b.queue(op, queue)
	if err != nil {
		return Counts{}, err
	}
	msg, err := b.exec(ctx, lua.Run{Script: scCounts, Keys: keysOf(scCounts, q), Args: nil}, nil)
	if err != nil {
		return Counts{}, errorFor(call{op: op, queue: queue}, err)
	}
	return countsReply(msg)
}

// NextDue reads how long, on the server's clock, until the earliest scheduled job of queue
// falls due: 0 when one is due now; ok is false when nothing is scheduled. Idle workers use
// it to wake at the run-at instead of polling.
func (b *Bus) NextDue(ctx context.Context, queue string) (wait time.Duration, ok bool, err error) {
	const op = "due"
	q, err := b.queue(op, queue)
	if err != nil {
		return 0, false, err
	}
	msg, err := b.exec(ctx, b.dueRun(q), nil)
	if err != nil {
		return 0, false, errorFor(call{op: op, queue: queue}, err)
	}
	return dueReply(msg)
}

func (b *Bus) dueRun(q keys.Queue) lua.Run {
	return lua.Run{Script: scDue, Keys: keysOf(scDue, q), Args: nil}
}

// dueReply decodes a due reply: {} or {id, wait_ms}.
func dueReply(msg valkey.ValkeyMessage) (time.Duration, bool, error) {
	arr, err := msg.ToArray()
	if err != nil || (len(arr) != 0 && len(arr) != 2) {
		return 0, false, protocolError("due", "reply %v", msg)
	}
	if len(arr) == 0 {
		return 0, false, nil
	}
	wait, err := arr[1].AsInt64()
	if err != nil || wait < 0 {
		return 0, false, protocolError("due", "reply %v", msg)
	}
	return time.Duration(wait) * time.Millisecond, true, nil
}
