package bus

import (
	"errors"
	"time"

	"github.com/echocache/echocache/lua"
)

// The worker's side of lanes: its claims go to laneclaim once the queue keeps lane state
// (claim or completeclaim answers EMQLANES, or this process enqueued into a lane), the
// round trip's completes then ride in the same laneclaim call, an idle worker sleeps until the
// earliest moment a held-back lane may give work (laneclaim's wait, on a timer of its own),
// and a handler's RateLimited hands its job back and closes its lane.

// usesLanes reports whether the worker's claims go to laneclaim.
func (l *loop) usesLanes() bool { return l.lanes || l.w.b.usesFlow(l.w.q.Name()) }

// claimFor is the round trip's claim of n jobs: laneclaim while the queue keeps lane state.
func (l *loop) claimFor(n int) step {
	if l.usesLanes() {
		return l.laneClaimStep(nil, n)
	}
	return l.claimStep(n)
}

// completeClaimFor retires rs and claims up to n jobs in one call: laneclaim while the queue
// keeps lane state, completeclaim otherwise.
func (l *loop) completeClaimFor(rs []*inflight, n int) step {
	if l.usesLanes() {
		return l.laneClaimStep(rs, n)
	}
	return l.completeClaimStep(rs, n)
}

// toLanes takes a claim or completeclaim that answered EMQLANES (nothing was written): the
// finished jobs it carried go out again, with a laneclaim, at once.
func (l *loop) toLanes(rs []*inflight) {
	l.lanes, l.hungry = true, true
	l.resend = append(l.resend, rs...)
}

// laneClaimStep retires rs (none, or the jobs whose handler returned nil) and claims up to n
// jobs through the lanes, in one laneclaim call, and starts their handlers. When the claim
// came back short it arms the lane timer for the moment laneclaim named (a lane's next claim
// under its rate, the end of a RateLimited), or claims again at once when laneclaim stopped at
// its bound; a slot freed in a lane its cap had stopped pushes a wake marker.
func (l *loop) laneClaimStep(rs []*inflight, n int) step {
	w := l.w
	args := make([]string, 3, 3+2*len(rs))
	args[0], args[1], args[2] = itoa(msCeil(w.cfg.Lease)), itoa(int64(n)), itoa(int64(w.b.cfg.PromoteLimit))
	args = completeArgs(args, rs)
	c := call{op: "complete", queue: w.q.Name()}
	return step{lua.Run{Script: scLaneClaim, Keys: keysOf(scLaneClaim, w.q), Args: args}, func(res result) bool {
		if transient(res.err) {
			w.log.Error("bus: worker: claim", "err", errorFor(c, res.err))
			l.resend = append(l.resend, rs...)
			l.hungry = true // again after the round trip's backoff
			return false
		}
		if res.err != nil && len(rs) == 0 {
			return l.claimRefused(res.err)
		}
		var lr laneReply
		err := errorFor(c, res.err)
		if err == nil {
			lr, err = parseLaneReply(res.msg)
		}
		var refused []*StaleError
		if err == nil && len(rs) > 0 {
			refused, err = completeManyReply(w.q.Name(), jobsOf(rs), lr.retired, lr.refused)
		}
		if err != nil { // refused as a whole (a damaged key): the leases will run out
			w.log.Error("bus: worker: claim", "err", err)
			for _, r := range rs {
				delete(l.held, r)
			}
			l.hungry, l.streaming = false, false
			return true
		}
		w.b.noteFlow(w.q.Name(), lr.flow)
		l.lanes = lr.flow
		if len(rs) > 0 {
			l.retired(rs, refused)
		}
		if lr.paused {
			l.hungry, l.streaming = false, false
			return true
		}
		var claimed []*inflight
		if err := lr.jobs(w.q, func(j Job, id string) { claimed = append(claimed, w.route(j, id)) }); err != nil {
			w.log.Error("bus: worker: claim", "err", err)
			l.hungry, l.streaming = false, false
			return true
		}
		ok := l.took(claimed, n)
		if len(claimed) < n {
			switch {
			case lr.wait == 0:
				l.hungry = true
			case lr.wait > 0:
				l.armLane(lr.wait)
			}
		}
		return ok
	}}
}

// rateLimitedStep hands r's job back after its handler returned [RateLimited](delay): the
// job waits again with its claim refunded and its lane closed for delay.
func (l *loop) rateLimitedStep(r *inflight, delay time.Duration) step {
	w := l.w
	return step{rateLimitedRun(w.q, r.job, delay), func(res result) bool {
		out, ok, retry := l.settle(r, "ratelimited", res)
		if !ok {
			return !retry
		}
		w.b.noteFlow(w.q.Name(), true)
		l.lanes = true
		if delay > 0 {
			l.armLane(delay + time.Millisecond) // the lane opens again then, unless others claim first
		} else {
			l.hungry = true
		}
		w.emit(JobEvent{Type: JobRateLimited, Job: r.job, Kind: r.kind, Duration: r.dur, At: out.At})
		return true
	}}
}

// rateLimited reports whether a handler's error is a [RateLimited].
func rateLimited(err error) bool {
	var rl *RateLimitedError
	return errors.As(err, &rl)
}

// rateLimitedDelay is the delay of a handler's [RateLimited] error, bounded as RateLimited
// bounds it: a *RateLimitedError the handler built itself may hold any Delay (ratelimited
// refuses one past a day), or be a nil pointer.
func rateLimitedDelay(err error) time.Duration {
	var rl *RateLimitedError
	if !errors.As(err, &rl) || rl == nil {
		return 0
	}
	return min(max(rl.Delay, 0), MaxRateLimited)
}

// armLane makes the lane timer fire after d unless it fires sooner already: the moment a lane
// held back by its rate or a closure may give work (laneclaim's wait). It is a timer of its
// own because the schedule's due timer is re-armed from the schedule's head alone.
func (l *loop) armLane(d time.Duration) {
	at := time.Now().Add(d)
	if l.laneAt.IsZero() || at.Before(l.laneAt) || l.laneAt.Before(time.Now()) {
		l.laneTimer.Reset(d)
		l.laneAt = at
	}
}

// laneFired takes the lane timer: claim, a held-back lane may give work now.
func (l *loop) laneFired() {
	l.laneAt = time.Time{}
	l.feed()
}
