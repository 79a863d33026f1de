package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/echocache/echocache/lua"
)

// The outcomes of finished handlers: completes (one completemany per round trip), fails,
// snoozes and hand-backs, and what to do when the server refuses one or cannot be reached.
// A reply that was a transport error puts the job on loop.resend: it goes out again with the
// next round trip. Every step reports what happened to its jobs through emit, at the end.

// outcomeSteps are the scripts that record the outcomes of sending: one fail or snooze for
// each job whose handler did not return nil. The others, completes, are returned: they go in
// one completemany, or in the round trip's completeclaim.
func (l *loop) outcomeSteps(sending []*inflight) (steps []step, completes []*inflight) {
	for _, r := range sending {
		if r.handBack && !r.cancelled {
			// A hand-back refused as not active met a cancelled job (settle): it goes to
			// outcomeStep's fail like any cancelled job, which sends it to dead.
			steps = append(steps, l.snoozeStep(r, 0, JobHandedBack))
			continue
		}
		if r.preErr == nil && r.err == nil {
			if value, ok := r.takeResult(); ok {
				steps = append(steps, l.completeResultStep(r, value)) // a result: a complete of its own
				continue
			}
			completes = append(completes, r)
			continue
		}
		steps = append(steps, l.outcomeStep(r))
	}
	return steps, completes
}

// outcomeStep is the script that records the outcome of a job whose handler failed, snoozed
// or was cancelled by Close (completes go in one completeStep).
func (l *loop) outcomeStep(r *inflight) step {
	w := l.w
	err := r.err
	if r.preErr != nil {
		err = r.preErr
	}
	// A handler's own panic fails the job, whatever its value: a panic raised with a
	// SkipRetry or Snooze error is no instruction, wrapped by a middleware or not.
	var pe *PanicError
	panicked := errors.As(err, &pe)
	var snooze *SnoozeError
	switch {
	case r.cancelled:
		// Cancelled while it ran: fail it, whatever it returned; the script sends it to dead.
	case !panicked && errors.As(err, &snooze):
		var d time.Duration
		if snooze != nil { // a nil *SnoozeError in the chain snoozes for no time
			d = snooze.Delay
		}
		return l.snoozeStep(r, d, JobSnoozed)
	case !panicked && rateLimited(err):
		return l.rateLimitedStep(r, rateLimitedDelay(err))
	case l.pastDeadline && r.ctx != nil && errors.Is(context.Cause(r.ctx), ErrWorkerClosed):
		// Cancelled by Close's deadline: hand the job back without counting a failure.
		return l.snoozeStep(r, 0, JobHandedBack)
	}
	maxAttempts := w.cfg.MaxAttempts
	backoff := w.cfg.Backoff
	if r.h != nil {
		maxAttempts, backoff = r.h.maxAttempts, r.h.backoff
	}
	if !panicked && (errors.Is(err, ErrSkipRetry) || errors.Is(err, ErrNoEnvelope)) {
		maxAttempts = 1 // the fail script sends it to dead
	}
	delay := max(backoff(r.job.Token), 0)
	args := []string{r.job.ID.String(), itoa(r.job.Token), itoa(msCeil(delay)), itoa(int64(scriptCount(maxAttempts))), itoa(int64(w.b.cfg.MaxAttempts)), failureText(err.Error())}
	return step{lua.Run{Script: scFail, Keys: w.kFail, Args: args}, func(res result) bool {
		out, ok, retry := l.settle(r, "fail", res)
		if !ok {
			return !retry
		}
		w.stats.failed.Add(1)
		if out.State == StateScheduled {
			l.armDue(delay + time.Millisecond) // wake for the retry, if no worker took it sooner
		}
		e := JobEvent{Type: JobRetried, Job: r.job, Kind: r.kind, Err: err, Duration: r.dur, At: out.At}
		if out.State == StateDead {
			e.Type = JobDead
		}
		w.emit(e)
		return true
	}}
}

// snoozeStep hands r's job back to schedule for delay (to pending when 0) without counting a
// failure, and reports it as typ (snoozed, or handed back by Close).
func (l *loop) snoozeStep(r *inflight, delay time.Duration, typ JobEventType) step {
	w := l.w
	args := []string{r.job.ID.String(), itoa(r.job.Token), itoa(msCeil(delay))}
	return step{lua.Run{Script: scSnooze, Keys: w.kSnooze, Args: args}, func(res result) bool {
		out, ok, retry := l.settle(r, "snooze", res)
		if !ok {
			return !retry
		}
		if out.State == StateScheduled {
			l.armDue(delay + time.Millisecond)
		}
		w.emit(JobEvent{Type: typ, Job: r.job, Kind: r.kind, Duration: r.dur, At: out.At})
		return true
	}}
}

// settle reads the reply of a fail, snooze or ratelimited of r. A transient error queues r to
// be sent again (retry); otherwise r leaves the held set and a refusal (EMQSTALE and the like)
// is reported, and ok says the outcome was accepted. A snooze or ratelimited refused because
// the job is not active may have met a job cancelled while its handler ran, before a
// heartbeat told (FORMAT cancel: both refuse a cancelling job): r is queued again as
// cancelled, and its fail, fenced by the same token, sends it to dead if so, or is refused
// in turn if the job is no longer this worker's.
func (l *loop) settle(r *inflight, op string, res result) (out Outcome, ok, retry bool) {
	w := l.w
	out, err := outcome(op, call{op, w.q.Name(), r.job.ID, r.job.Token}, res.msg, res.err)
	if transient(res.err) {
		w.log.Error("bus: worker: "+op, "job", r.job.ID, "err", err)
		l.resend = append(l.resend, r)
		return out, false, true
	}
	var stale *StaleError
	if op != "fail" && !r.cancelled && errors.As(err, &stale) && stale.Reason == NotActive {
		r.cancelled = true
		r.err = fmt.Errorf("%w: job %s: its %s was refused as not active", ErrCancelled, r.job.ID, op)
		l.resend = append(l.resend, r) // still held: not a failed round trip
		return out, false, false
	}
	delete(l.held, r)
	if err != nil {
		l.refused(r, err)
		return out, false, false
	}
	return out, true, false
}

// refused reports a fail or snooze the server refused: EMQSTALE (the job is someone else's
// now) or a damaged key, whose job is left to its lease.
func (l *loop) refused(r *inflight, err error) {
	if errors.Is(err, ErrStale) {
		l.w.emit(JobEvent{Type: JobStale, Job: r.job, Kind: r.kind, Err: err, Duration: r.dur})
		return
	}
	l.w.log.Error("bus: worker: the outcome was refused; the job runs again after its lease", "job", r.job.ID, "kind", r.kind, "err", err)
}

// completeStep retires the jobs whose handler returned nil, in one completemany call: one
// script run for the batch, each job still fenced by its own token.
func (l *loop) completeStep(rs []*inflight) step {
	w := l.w
	c := call{op: "complete", queue: w.q.Name()}
	run := lua.Run{Script: scCompleteMany, Keys: w.kCompleteMany, Args: completeArgs(make([]string, 0, 2*len(rs)), rs)}
	return step{run, func(res result) bool {
		if transient(res.err) {
			w.log.Error("bus: worker: complete", "err", errorFor(c, res.err))
			l.resend = append(l.resend, rs...)
			return false
		}
		var refused []*StaleError
		err := errorFor(c, res.err)
		if err == nil {
			refused, err = completeManyReplyOf(w.q.Name(), jobsOf(rs), res.msg)
		}
		if err != nil { // refused as a whole (a damaged key): the leases will run out
			w.log.Error("bus: worker: complete", "err", err)
			for _, r := range rs {
				delete(l.held, r)
			}
			return true
		}
		l.retired(rs, refused)
		return true
	}}
}

// completeArgs appends the id and token of each of rs: the starred ARGV of completemany and
// completeclaim.
func completeArgs(args []string, rs []*inflight) []string {
	for _, r := range rs {
		id := r.idStr
		if id == "" {
			id = r.job.ID.String()
		}
		args = append(args, id, itoa(r.job.Token))
	}
	return args
}

// jobsOf is the jobs of rs.
func jobsOf(rs []*inflight) []Job {
	jobs := make([]Job, len(rs))
	for i, r := range rs {
		jobs[i] = r.job
	}
	return jobs
}

// retired reports each job of an accepted completemany or completeclaim: retired, or refused
// as stale.
func (l *loop) retired(rs []*inflight, refused []*StaleError) {
	var stale map[int]*StaleError
	if len(refused) > 0 {
		stale = make(map[int]*StaleError, len(refused))
	}
	for _, e := range refused {
		for i, r := range rs {
			if r.job.ID == e.ID && r.job.Token == e.Token {
				stale[i] = e
			}
		}
	}
	for i, r := range rs {
		delete(l.held, r)
		if e := stale[i]; e != nil {
			l.w.emit(JobEvent{Type: JobStale, Job: r.job, Kind: r.kind, Err: e, Duration: r.dur})
			continue
		}
		l.w.emit(JobEvent{Type: JobCompleted, Job: r.job, Kind: r.kind, Duration: r.dur})
	}
}

// abandon gives up on the outcomes that could not be sent after Close's deadline: their jobs
// are left to lease expiry.
func (l *loop) abandon() {
	for _, r := range l.outcomes {
		l.w.log.Warn("bus: worker: closing: the outcome could not be sent; the job runs again after its lease", "job", r.job.ID, "kind", r.kind)
		delete(l.held, r)
	}
	l.outcomes = nil
}

// emit counts, logs and reports one event.
func (w *Worker) emit(e JobEvent) {
	s := &w.stats
	level := slog.LevelDebug
	switch e.Type {
	case JobCompleted:
		s.completed.Add(1)
	case JobRetried:
		s.retried.Add(1)
		level = slog.LevelWarn
	case JobDead:
		s.dead.Add(1)
		level = slog.LevelError
	case JobSnoozed:
		s.snoozed.Add(1)
	case JobHandedBack:
		s.handedBack.Add(1)
		level = slog.LevelInfo
	case JobStale:
		s.stale.Add(1)
		level = slog.LevelWarn
	case JobLeaseLost:
		s.leaseLost.Add(1)
		level = slog.LevelWarn
	case JobCancelled:
		s.cancelled.Add(1)
		level = slog.LevelInfo
	case JobRateLimited:
		s.rateLimited.Add(1)
		level = slog.LevelInfo
	}
	if w.log.Enabled(context.Background(), level) {
		attrs := []any{"job", e.Job.ID, "kind", e.Kind, "token", e.Job.Token}
		if e.Err != nil {
			attrs = append(attrs, "err", e.Err)
		}
		if e.Duration > 0 {
			attrs = append(attrs, "duration", e.Duration)
		}
		if !e.At.IsZero() {
			attrs = append(attrs, "at", e.At)
		}
		w.log.Log(context.Background(), level, "bus: job "+e.Type.String(), attrs...)
	}
	if w.cfg.OnEvent != nil {
		w.cfg.OnEvent(e)
	}
}
