package bus

import (
	"errors"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/lua"
)

// The loop's steps that find work: the claim for the free slots, housekeeping (reap and
// promote) and the schedule's head, which arms the due timer.

// claimStep claims up to n jobs and starts their handlers.
func (l *loop) claimStep(n int) step {
	w := l.w
	args := []string{itoa(msCeil(w.cfg.Lease)), itoa(int64(n)), itoa(int64(w.b.cfg.PromoteLimit))}
	return step{lua.Run{Script: scClaim, Keys: w.kClaim, Args: args}, func(res result) bool {
		if res.err != nil {
			return l.claimRefused(res.err)
		}
		rs, err := l.claimedJobs(res.msg)
		if err != nil {
			w.log.Error("bus: worker: claim", "err", err)
			l.hungry, l.streaming = false, false
			return true
		}
		return l.took(rs, n)
	}}
}

// completeClaimStep retires the jobs whose handler returned nil and claims up to n jobs, in
// one completeclaim call: each finished job fenced by its own token, the refused ones named.
func (l *loop) completeClaimStep(rs []*inflight, n int) step {
	w := l.w
	args := make([]string, 3, 3+2*len(rs))
	args[0], args[1], args[2] = itoa(msCeil(w.cfg.Lease)), itoa(int64(n)), itoa(int64(w.b.cfg.PromoteLimit))
	args = completeArgs(args, rs)
	c := call{op: "complete", queue: w.q.Name()}
	return step{lua.Run{Script: scCompleteClaim, Keys: w.kClaim, Args: args}, func(res result) bool {
		if transient(res.err) {
			w.log.Error("bus: worker: complete and claim", "err", errorFor(c, res.err))
			l.resend = append(l.resend, rs...)
			l.hungry = true // again after the round trip's backoff
			return false
		}
		var arr []valkey.ValkeyMessage
		err := errorFor(c, res.err)
		if errors.Is(err, errFlowControl) { // nothing written: retire and claim through the lanes
			l.toLanes(rs)
			return true
		}
		if err == nil {
			arr, err = res.msg.ToArray()
			if err != nil || len(arr) != 4 {
				err = protocolError("completeclaim", "reply %v", res.msg)
			}
		}
		var refused []*StaleError
		if err == nil {
			refused, err = completeManyReply(w.q.Name(), jobsOf(rs), arr[0], arr[1])
		}
		if err != nil { // refused as a whole (a damaged key): the leases will run out
			w.log.Error("bus: worker: complete and claim", "err", err)
			for _, r := range rs {
				delete(l.held, r)
			}
			l.hungry, l.streaming = false, false
			return true
		}
		l.retired(rs, refused)
		if paused, _ := arr[2].AsInt64(); paused == 1 {
			l.hungry, l.streaming = false, false
			return true
		}
		claimed, err := l.claimedJobs(arr[3])
		if err != nil {
			w.log.Error("bus: worker: complete and claim", "err", err)
			l.hungry, l.streaming = false, false
			return true
		}
		return l.took(claimed, n)
	}}
}

// claimRefused takes a claim the server answered with an error.
func (l *loop) claimRefused(rerr error) bool {
	w := l.w
	err := errorFor(call{op: "claim", queue: w.q.Name()}, rerr)
	switch {
	case errors.Is(err, ErrPaused):
		l.hungry, l.streaming = false, false
		return true
	case errors.Is(err, errFlowControl): // the queue has lanes: claim through them at once
		l.toLanes(nil)
		return true
	case transient(rerr):
		w.log.Error("bus: worker: claim", "err", err)
		l.hungry = true // again after the round trip's backoff
		return false
	}
	// The server refused the claim (a key of the wrong type): try again on the next wake or
	// wake timeout, not at once.
	w.log.Error("bus: worker: claim", "err", err)
	l.hungry, l.streaming = false, false
	return true
}

// claimedJobs reads the triples of a claim reply into routed jobs.
func (l *loop) claimedJobs(msg valkey.ValkeyMessage) ([]*inflight, error) {
	var rs []*inflight
	err := parseClaimed(l.w.q, msg, func(j Job, id string) {
		rs = append(rs, l.w.route(j, id))
	})
	return rs, err
}

// took starts the jobs a claim of n returned, unless the claim fell short of ClaimAck.
func (l *loop) took(rs []*inflight, n int) bool {
	w := l.w
	if l.unacked != nil && len(rs) > 0 {
		// The claim may be unknown to the replica a failover would promote, which could then
		// mint these tokens again: start nothing, hand the jobs back, back off.
		w.log.Warn("bus: worker: claim not acknowledged; handing its jobs back", "jobs", len(rs), "err", l.unacked)
		for _, r := range rs {
			w.stats.claimed.Add(1) // each claim spent an attempt: Claimed = Completed + HandedBack + ...
			w.emit(JobEvent{Type: JobClaimed, Job: r.job, Kind: r.kind})
			l.handBack(r)
		}
		l.hungry = true
		return false
	}
	full := len(rs) == n
	if !full {
		l.dueCheck = l.dueCheck || l.streaming // leaving a stream: learn when work falls due
	}
	l.hungry, l.streaming = full, full
	if len(rs) > 0 {
		l.start(rs)
	}
	return true
}

// housekeepSteps reap and promote, bounded; a full batch asks for another round at once. A
// reply they cannot read is logged as [ErrProtocol].
func (l *loop) housekeepSteps() []step {
	w := l.w
	limit := itoa(int64(w.cfg.HousekeepLimit))
	reap := step{lua.Run{Script: scReap, Keys: w.kReap, Args: []string{limit, "0", itoa(int64(w.b.cfg.MaxAttempts))}}, func(res result) bool {
		if res.err != nil {
			w.log.Error("bus: worker: reap", "err", errorFor(call{op: "reap", queue: w.q.Name()}, res.err))
			return !transient(res.err)
		}
		reaped, err := reapReply(res.msg)
		if err != nil {
			w.log.Error("bus: worker: reap", "err", err)
			return true
		}
		l.noteReap(len(reaped.Requeued), len(reaped.Dead))
		return true
	}}
	promote := step{lua.Run{Script: scPromote, Keys: w.kPromote, Args: []string{limit}}, func(res result) bool {
		if res.err != nil {
			w.log.Error("bus: worker: promote", "err", errorFor(call{op: "promote", queue: w.q.Name()}, res.err))
			return !transient(res.err)
		}
		moved, err := jobIDs("promote", res.msg)
		if err != nil {
			w.log.Error("bus: worker: promote", "err", err)
			return true
		}
		l.notePromote(len(moved))
		return true
	}}
	return []step{reap, promote}
}

// noteReap takes the counts of a reap: requeued jobs are work to claim.
func (l *loop) noteReap(requeued, dead int) {
	n := requeued + dead
	if n == 0 {
		return
	}
	l.w.log.Info("bus: worker: reaped expired leases", "requeued", requeued, "dead", dead)
	if n >= l.w.cfg.HousekeepLimit {
		l.housekeepDue = true
	}
	if requeued > 0 {
		l.hungry = true
	}
}

// notePromote takes the count of a promote: moved jobs are work to claim.
func (l *loop) notePromote(moved int) {
	if moved == 0 {
		return
	}
	l.hungry = true
	if moved >= l.w.cfg.HousekeepLimit {
		l.housekeepDue = true
	}
}

// dueStep reads the schedule's head and arms the due timer for its run-at.
func (l *loop) dueStep() step {
	w := l.w
	return step{lua.Run{Script: scDue, Keys: w.kDue, Args: nil}, func(res result) bool {
		if res.err != nil {
			w.log.Error("bus: worker: reading the schedule", "err", errorFor(call{op: "due", queue: w.q.Name()}, res.err))
			l.dueCheck = transient(res.err)
			return !l.dueCheck
		}
		wait, ok, err := dueReply(res.msg)
		switch {
		case err != nil:
			w.log.Error("bus: worker: reading the schedule", "err", err)
		case !ok:
			l.dueTimer.Stop()
			l.dueAt = time.Time{}
			l.dueAgain = 0
		default:
			d := wait + time.Millisecond // the server's clock has ms resolution
			if wait == 0 {
				// Due already, and still there after this round trip's claim, if it had one:
				// the worker is full, the queue is paused, or claims promote nothing
				// (PromoteLimit). A claim takes it once one can; reading the head again every
				// millisecond meanwhile would be a round trip per millisecond. Back off,
				// doubling, up to WakeTimeout.
				l.dueAgain = min(max(2*l.dueAgain, time.Millisecond), w.cfg.WakeTimeout)
				d = l.dueAgain
			} else {
				l.dueAgain = 0
			}
			l.dueTimer.Reset(d)
			l.dueAt = time.Now().Add(d)
		}
		return true
	}}
}
