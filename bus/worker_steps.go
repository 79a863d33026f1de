package bus

import (
	"errors"
	"time"

	"github.com/echocache/echocache/lua"
)

// The loop's steps that find work: the claim for the free slots, housekeeping (reap and
// promote) and the schedule's head, which arms the due timer.

// claimStep claims up to n jobs and starts their handlers.
func (l *loop) claimStep(n int) step {
	w := l.w
	args := []string{itoa(msCeil(w.cfg.Lease)), itoa(int64(n)), itoa(int64(w.b.cfg.PromoteLimit))}
	return step{lua.Run{Script: scClaim, Keys: w.kClaim, Args: args}, func(res result) bool {
		jobs, err := claimed(w.q, res.msg, res.err)
		switch {
		case errors.Is(err, ErrPaused):
			l.hungry, l.streaming = false, false
			return true
		case transient(res.err):
			w.log.Error("bus: worker: claim", "err", err)
			l.hungry = true // again after the round trip's backoff
			return false
		case err != nil:
			// The server refused the claim (a key of the wrong type): try again on the next
			// wake or wake timeout, not at once.
			w.log.Error("bus: worker: claim", "err", err)
			l.hungry, l.streaming = false, false
			return true
		}
		if l.unacked != nil && len(jobs) > 0 {
			// The claim may be unknown to the replica a failover would promote, which could
			// then mint these tokens again: start nothing, hand the jobs back, back off.
			w.log.Warn("bus: worker: claim not acknowledged; handing its jobs back", "jobs", len(jobs), "err", l.unacked)
			for _, j := range jobs {
				l.handBack(j)
			}
			l.hungry = true
			return false
		}
		full := len(jobs) == n
		if !full {
			l.dueCheck = l.dueCheck || l.streaming // leaving a stream: learn when work falls due
		}
		l.hungry, l.streaming = full, full
		for _, j := range jobs {
			l.start(j)
		}
		return true
	}}
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
		default:
			l.dueTimer.Reset(wait + time.Millisecond) // the server's clock has ms resolution
			l.dueAt = time.Now().Add(wait + time.Millisecond)
		}
		return true
	}}
}
