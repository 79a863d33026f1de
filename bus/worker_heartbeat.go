package bus

import (
	"fmt"
	"time"

	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
)

// The heartbeat: one batched extend renews every lease the worker holds, and a lease the
// extend finds lost cancels its handler.

// leaseGroup is the jobs of one extend: one lease length, each job id once.
type leaseGroup struct {
	lease time.Duration
	held  []*inflight
	ids   map[keys.JobID]*inflight
}

// extendSteps renew the lease of every held job whose handler runs or waits for a pool
// goroutine (not of those whose outcome is being sent, nor of those past their timeout), one
// extend per lease length: one in all unless kinds name their own leases.
func (l *loop) extendSteps() []step {
	groups := l.leaseGroups(time.Now())
	steps := make([]step, len(groups))
	for i, g := range groups {
		steps[i] = l.extendStep(g)
	}
	return steps
}

// leaseGroups sorts the renewable held jobs by lease length. A job held twice (reaped, then
// claimed again by this worker) goes to a group of its own, since the reply names lost jobs
// by id only.
func (l *loop) leaseGroups(now time.Time) []*leaseGroup {
	var groups []*leaseGroup
	l.ex.mu.Lock() // the handlers' start and timeout marks
	defer l.ex.mu.Unlock()
	for r := range l.held {
		if r.lost || r.cancelled || r.returned || r.timedOut(now) {
			continue
		}
		var g *leaseGroup
		for _, c := range groups {
			if c.lease == r.lease && c.ids[r.job.ID] == nil {
				g = c
				break
			}
		}
		if g == nil {
			g = &leaseGroup{lease: r.lease, ids: map[keys.JobID]*inflight{}}
			groups = append(groups, g)
		}
		g.held = append(g.held, r)
		g.ids[r.job.ID] = r
	}
	return groups
}

// extendStep renews the leases of g's jobs. A reply it cannot read is logged as
// [ErrProtocol]; the leases are then renewed again at the next heartbeat.
func (l *loop) extendStep(g *leaseGroup) step {
	w := l.w
	jobs := make([]Job, len(g.held))
	args := make([]string, 1, 1+2*len(g.held))
	args[0] = itoa(msCeil(g.lease))
	for i, r := range g.held {
		jobs[i] = r.job
		args = append(args, r.job.ID.String(), itoa(r.job.Token))
	}
	return step{lua.Run{Script: scExtend, Keys: w.kExtend, Args: args}, func(res result) bool {
		if res.err != nil {
			w.log.Error("bus: worker: heartbeat", "err", errorFor(call{op: "extend", queue: w.q.Name()}, res.err))
			return !transient(res.err)
		}
		_, lost, err := extendReply(w.q.Name(), jobs, res.msg)
		if err != nil {
			w.log.Error("bus: worker: heartbeat", "err", err)
			return true
		}
		l.extended(g, lost)
		return true
	}}
}

// extended applies one extend's reply: each lost lease cancels its handler (or drops its job
// before it starts), and so does each job found cancelled (whose dropped job is failed
// instead); the other jobs were renewed. A job whose handler returned since the extend was sent
// is left to its outcome, which may have retired it already: its fence answers for it.
func (l *loop) extended(g *leaseGroup, lost []*StaleError) {
	gone := make(map[keys.JobID]bool, len(lost))
	for _, e := range lost {
		gone[e.ID] = true
		r := g.ids[e.ID]
		if r == nil || r.lost || r.cancelled || r.returned {
			continue
		}
		if _, held := l.held[r]; !held {
			continue
		}
		if e.Reason == Cancelled {
			l.cancelledJob(r, e)
		} else {
			l.lostLease(r, e)
		}
	}
	for _, r := range g.held {
		if !gone[r.job.ID] {
			l.w.emit(JobEvent{Type: JobExtended, Job: r.job, Kind: r.kind})
		}
	}
}

// cancelledJob cancels the handler of a job a heartbeat found cancelled (cause
// [ErrCancelled]). The job is still this worker's: its outcome is sent when the handler
// returns, and the fail script sends a cancelling job to dead. A job still waiting for a pool
// goroutine (the prefetch buffer) never runs: it is failed at once, with the next round trip.
func (l *loop) cancelledJob(r *inflight, e *StaleError) {
	r.cancelled = true
	// Count it before the handler can see it, as lostLease does.
	l.w.emit(JobEvent{Type: JobCancelled, Job: r.job, Kind: r.kind, Err: e})
	if l.ex.drop(r) {
		l.busy--
		r.returned, r.err = true, fmt.Errorf("%w: job %s, before its handler started", ErrCancelled, r.job.ID)
		l.outcomes = append(l.outcomes, r)
		return
	}
	l.ex.cancelRunning(r, ErrCancelled)
}

// lostLease cancels the handler of a job whose lease a heartbeat found lost (cause
// [ErrLeaseLost]); its outcome will not be sent. A job still waiting for a pool goroutine is
// dropped: its handler never runs.
func (l *loop) lostLease(r *inflight, e *StaleError) {
	r.lost = true
	// Count it before the handler can see it: a caller that learns of the loss from the
	// handler's context finds it in Stats already.
	l.w.emit(JobEvent{Type: JobLeaseLost, Job: r.job, Kind: r.kind, Err: e})
	if l.ex.drop(r) {
		l.busy--
		delete(l.held, r)
		return
	}
	l.ex.cancelRunning(r, ErrLeaseLost)
}
