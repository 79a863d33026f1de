package bus

import (
	"errors"
	"time"

	"github.com/echocache/echocache/lua"
)

// housekeepSteps reap and promote, bounded; a full batch asks for another round at once.
func (w *Worker) housekeepSteps(st *loopState) []step {
	limit := itoa(int64(w.cfg.HousekeepLimit))
	reap := step{lua.Run{Script: scReap, Keys: w.kReap, Args: []string{limit, "0", itoa(int64(w.b.cfg.MaxAttempts))}}, func(res result) bool {
		if res.err != nil {
			w.log.Error("bus: worker: reap", "err", errorFor(call{op: "reap", queue: w.q.Name()}, res.err))
			return !transient(res.err)
		}
		arr, err := res.msg.ToArray()
		if err != nil || len(arr) != 2 {
			return true
		}
		requeued, _ := arr[0].AsStrSlice()
		dead, _ := arr[1].AsStrSlice()
		if n := len(requeued) + len(dead); n > 0 {
			w.log.Info("bus: worker: reaped expired leases", "requeued", len(requeued), "dead", len(dead))
			if n >= w.cfg.HousekeepLimit {
				st.hkDue = true
			}
			if len(requeued) > 0 {
				st.hungry = true
			}
		}
		return true
	}}
	promote := step{lua.Run{Script: scPromote, Keys: w.kPromote, Args: []string{limit}}, func(res result) bool {
		if res.err != nil {
			w.log.Error("bus: worker: promote", "err", errorFor(call{op: "promote", queue: w.q.Name()}, res.err))
			return !transient(res.err)
		}
		moved, _ := res.msg.AsStrSlice()
		if len(moved) > 0 {
			st.hungry = true
			if len(moved) >= w.cfg.HousekeepLimit {
				st.hkDue = true
			}
		}
		return true
	}}
	return []step{reap, promote}
}

// claimStep claims up to n jobs and starts their handlers.
func (w *Worker) claimStep(st *loopState, n int) step {
	args := []string{itoa(ms(w.cfg.Lease)), itoa(int64(n)), itoa(int64(w.b.cfg.PromoteLimit))}
	return step{lua.Run{Script: scClaim, Keys: w.kClaim, Args: args}, func(res result) bool {
		jobs, err := claimed(w.q, res.msg, res.err)
		switch {
		case errors.Is(err, ErrPaused):
			st.hungry, st.streaming = false, false
			return true
		case transient(res.err):
			w.log.Error("bus: worker: claim", "err", err)
			st.hungry = true // again after the round trip's backoff
			return false
		case err != nil:
			// The server refused the claim (a key of the wrong type): try again on the next
			// wake or wake timeout, not at once.
			w.log.Error("bus: worker: claim", "err", err)
			st.hungry, st.streaming = false, false
			return true
		}
		full := len(jobs) == n
		if !full {
			st.dueCheck = st.dueCheck || st.streaming // leaving a stream: learn when work falls due
		}
		st.hungry, st.streaming = full, full
		for _, j := range jobs {
			w.start(st, j)
		}
		return true
	}}
}

// dueStep reads the schedule's head and arms the due timer for its run-at.
func (w *Worker) dueStep(st *loopState) step {
	return step{lua.Run{Script: scDue, Keys: w.kDue, Args: nil}, func(res result) bool {
		if res.err != nil {
			w.log.Error("bus: worker: reading the schedule", "err", errorFor(call{op: "due", queue: w.q.Name()}, res.err))
			st.dueCheck = transient(res.err)
			return !st.dueCheck
		}
		wait, ok, err := dueReply(res.msg)
		switch {
		case err != nil:
			w.log.Error("bus: worker: reading the schedule", "err", err)
		case !ok:
			st.due.Stop()
			st.dueAt = time.Time{}
		default:
			st.due.Reset(wait + time.Millisecond) // the server's clock has ms resolution
			st.dueAt = time.Now().Add(wait + time.Millisecond)
		}
		return true
	}}
}
