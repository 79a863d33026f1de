package bus

import (
	"context"
	"errors"
	"time"

	"github.com/echocache/echocache/lua"
)

// outcomeStep is the script that records the outcome of a job whose handler failed, snoozed
// or was cancelled by Close (completes go in one completeStep). requeue is called when the
// reply was a transport error, to send it again.
func (w *Worker) outcomeStep(st *loopState, r *running, requeue func()) step {
	id, tok := r.job.ID.String(), itoa(r.job.Token)
	err := r.err
	if r.preErr != nil {
		err = r.preErr
	}
	var snooze *SnoozeError
	switch {
	case errors.As(err, &snooze):
		return w.snoozeStep(st, r, snooze.Delay, JobSnoozed, requeue)
	case st.hard && errors.Is(context.Cause(r.ctx), ErrWorkerClosed):
		// Cancelled by Close's deadline: hand the job back without counting a failure.
		return w.snoozeStep(st, r, 0, JobHandedBack, requeue)
	}
	maxAttempts := w.cfg.MaxAttempts
	backoff := w.cfg.Backoff
	if r.h != nil {
		maxAttempts, backoff = r.h.maxAttempts, r.h.backoff
	}
	if errors.Is(err, ErrSkipRetry) || errors.Is(err, ErrNoEnvelope) {
		maxAttempts = 1 // the fail script sends it to dead
	}
	delay := max(backoff(r.job.Token), 0)
	args := []string{id, tok, itoa(ms(delay)), itoa(int64(maxAttempts)), itoa(int64(w.b.cfg.MaxAttempts))}
	return step{lua.Run{Script: scFail, Keys: w.kFail, Args: args}, func(res result) bool {
		out, ok, retry := w.settle(st, r, "fail", res, requeue)
		if !ok {
			return !retry
		}
		w.stats.failed.Add(1)
		if out.State == StateScheduled {
			st.armDue(delay + time.Millisecond) // wake for the retry, if no worker took it sooner
		}
		e := JobEvent{Type: JobRetried, Job: r.job, Kind: r.kind, Err: err, Duration: r.dur, At: out.At}
		if out.State == StateDead {
			e.Type = JobDead
		}
		w.emit(e)
		return true
	}}
}

// settle reads the reply of a fail or snooze of r. A transient error requeues the step
// (retry); otherwise r leaves the held set and a refusal (EMQSTALE and the like) is reported,
// and ok says the outcome was accepted.
func (w *Worker) settle(st *loopState, r *running, op string, res result, requeue func()) (out Outcome, ok, retry bool) {
	out, err := outcome(op, call{op, w.q.Name(), r.job.ID, r.job.Token}, res.msg, res.err)
	if transient(res.err) {
		w.log.Error("bus: worker: "+op, "job", r.job.ID, "err", err)
		requeue()
		return out, false, true
	}
	delete(st.held, r)
	if err != nil {
		w.refused(r, err)
		return out, false, false
	}
	return out, true, false
}

// completeStep retires the jobs whose handler returned nil, in one completemany call: one
// script run for the batch, each job still fenced by its own token.
func (w *Worker) completeStep(st *loopState, rs []*running, requeue func()) step {
	jobs := make([]Job, len(rs))
	for i, r := range rs {
		jobs[i] = r.job
	}
	return step{completeManyRun(w.q, jobs), func(res result) bool {
		if transient(res.err) {
			w.log.Error("bus: worker: complete", "err", errorFor(call{op: "complete", queue: w.q.Name()}, res.err))
			requeue()
			return false
		}
		var refused []*StaleError
		err := errorFor(call{op: "complete", queue: w.q.Name()}, res.err)
		if err == nil {
			refused, err = completeManyReply(w.q.Name(), jobs, res.msg)
		}
		if err != nil { // refused as a whole (a damaged key): the leases will run out
			w.log.Error("bus: worker: complete", "err", err)
			for _, r := range rs {
				delete(st.held, r)
			}
			return true
		}
		stale := make(map[int]*StaleError, len(refused))
		for _, e := range refused {
			for i, j := range jobs {
				if j.ID == e.ID && j.Token == e.Token {
					stale[i] = e
				}
			}
		}
		for i, r := range rs {
			delete(st.held, r)
			if e := stale[i]; e != nil {
				w.emit(JobEvent{Type: JobStale, Job: r.job, Kind: r.kind, Err: e, Duration: r.dur})
				continue
			}
			w.emit(JobEvent{Type: JobCompleted, Job: r.job, Kind: r.kind, Duration: r.dur})
		}
		return true
	}}
}

func (w *Worker) snoozeStep(st *loopState, r *running, delay time.Duration, typ JobEventType, requeue func()) step {
	args := []string{r.job.ID.String(), itoa(r.job.Token), itoa(ms(delay))}
	return step{lua.Run{Script: scSnooze, Keys: w.kSnooze, Args: args}, func(res result) bool {
		out, ok, retry := w.settle(st, r, "snooze", res, requeue)
		if !ok {
			return !retry
		}
		if out.State == StateScheduled {
			st.armDue(delay + time.Millisecond)
		}
		w.emit(JobEvent{Type: typ, Job: r.job, Kind: r.kind, Duration: r.dur, At: out.At})
		return true
	}}
}

// refused reports a fail or snooze the server refused: EMQSTALE (the job is someone else's
// now) or a damaged key, whose job is left to its lease.
func (w *Worker) refused(r *running, err error) {
	if errors.Is(err, ErrStale) {
		w.emit(JobEvent{Type: JobStale, Job: r.job, Kind: r.kind, Err: err, Duration: r.dur})
		return
	}
	w.log.Error("bus: worker: the outcome was refused; the job runs again after its lease", "job", r.job.ID, "kind", r.kind, "err", err)
}

// abandon gives up on the outcomes that could not be sent after Close's deadline: their jobs
// are left to lease expiry.
func (w *Worker) abandon(st *loopState) {
	for _, r := range st.outcomes {
		w.log.Warn("bus: worker: closing: the outcome could not be sent; the job runs again after its lease", "job", r.job.ID, "kind", r.kind)
		delete(st.held, r)
	}
	st.outcomes = nil
}
