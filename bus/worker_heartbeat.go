package bus

import (
	"time"

	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
)

// extendSteps renew the lease of every running handler's job (not of those whose outcome is
// being sent, nor of those past their timeout), one extend per lease length: one in all
// unless kinds name their own leases.
func (w *Worker) extendSteps(st *loopState) []step {
	now := time.Now()
	// One group per lease length; a job held twice (reaped, then claimed again by this
	// worker) goes to a group of its own, since the reply names lost jobs by id only.
	type group struct {
		lease time.Duration
		jobs  []*running
		ids   map[keys.JobID]bool
	}
	var groups []*group
	for r := range st.held {
		if r.lost || r.finished || r.timedOut(now) {
			continue
		}
		var g *group
		for _, c := range groups {
			if c.lease == r.lease && !c.ids[r.job.ID] {
				g = c
				break
			}
		}
		if g == nil {
			g = &group{lease: r.lease, ids: map[keys.JobID]bool{}}
			groups = append(groups, g)
		}
		g.jobs = append(g.jobs, r)
		g.ids[r.job.ID] = true
	}
	var steps []step
	for _, g := range groups {
		rs := g.jobs
		args := make([]string, 1, 1+2*len(rs))
		args[0] = itoa(ms(g.lease))
		byID := make(map[string]*running, len(rs))
		for _, r := range rs {
			args = append(args, r.job.ID.String(), itoa(r.job.Token))
			byID[r.job.ID.String()] = r
		}
		steps = append(steps, step{lua.Run{Script: scExtend, Keys: w.kExtend, Args: args}, func(res result) bool {
			if res.err != nil {
				w.log.Error("bus: worker: heartbeat", "err", errorFor(call{op: "extend", queue: w.q.Name()}, res.err))
				return !transient(res.err)
			}
			arr, err := res.msg.ToArray()
			if err != nil || len(arr) != 2 {
				w.log.Error("bus: worker: heartbeat", "err", protocolError("extend", "reply %v", res.msg))
				return true
			}
			flat, _ := arr[1].AsStrSlice()
			lost := make(map[string]bool, len(flat)/2)
			for i := 0; i+1 < len(flat); i += 2 {
				lost[flat[i]] = true
				r := byID[flat[i]]
				if r == nil || r.lost {
					continue
				}
				r.lost = true
				reason := StaleReason(flat[i+1][len("EMQSTALE "):])
				serr := &StaleError{Op: "extend", Queue: w.q.Name(), ID: r.job.ID, Token: r.job.Token, Reason: reason}
				// Count it before the handler can see it: a caller that learns of the loss
				// from the handler's context finds it in Stats already.
				w.emit(JobEvent{Type: JobLeaseLost, Job: r.job, Kind: r.kind, Err: serr})
				r.cancel(ErrLeaseLost)
				if r.finished {
					delete(st.held, r)
				}
			}
			for id, r := range byID {
				if !lost[id] {
					w.emit(JobEvent{Type: JobExtended, Job: r.job, Kind: r.kind})
				}
			}
			return true
		}})
	}
	return steps
}
