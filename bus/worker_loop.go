package bus

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"time"

	"github.com/echocache/echocache/lua"
)

// loopState is the loop's own state; only the loop goroutine touches it.
type loopState struct {
	held     map[*running]struct{} // a job reaped from under its handler and claimed again is held twice
	outcomes []*running            // finished handlers whose outcome is not yet accepted
	running  int                   // handlers running

	hungry    bool // claim when slots are free: the last claim came back full, or a wake came
	streaming bool // the last claim came back full: no need to read the schedule
	dueCheck  bool // read the schedule's head at the next round trip
	blocking  bool // a block request is outstanding
	draining  bool
	hard      bool
	beatDue   bool
	hkDue     bool
	errWait   time.Duration // backoff after a failed round trip

	pool    int  // handler goroutines started
	started bool // handlers were started since the loop last collected results

	due   *time.Timer // wakes the loop when scheduled work falls due
	dueAt time.Time   // when due fires (local monotonic clock); zero when stopped
}

// armDue makes the due timer fire after d unless it fires sooner already.
func (st *loopState) armDue(d time.Duration) {
	at := time.Now().Add(d)
	if st.dueAt.IsZero() || at.Before(st.dueAt) || st.dueAt.Before(time.Now()) {
		st.due.Reset(d)
		st.dueAt = at
	}
}

// loop is the worker's one goroutine that talks to the server (besides the blocker): every
// round trip is one pipeline of the outcomes of finished handlers, the heartbeat's extend,
// housekeeping, the claim for the free slots and the schedule's head, in that order.
func (w *Worker) loop() {
	st := &loopState{held: map[*running]struct{}{}, hungry: true, dueCheck: true, hkDue: w.cfg.HousekeepInterval > 0}
	beat := time.NewTimer(w.beat)
	defer beat.Stop()
	hk := time.NewTimer(w.jitter(w.cfg.HousekeepInterval))
	if w.cfg.HousekeepInterval < 0 {
		hk.Stop()
	}
	defer hk.Stop()
	st.due = time.NewTimer(time.Hour)
	st.due.Stop()
	defer st.due.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	stop, hard := w.stop, w.hard
	waitingRetry := false

	for {
		if st.started {
			// Let the handlers just started run before collecting: fast handlers finish
			// meanwhile, and their outcomes share the next round trip.
			st.started = false
			runtime.Gosched()
		}
		for drained := false; !drained; {
			select {
			case r := <-w.results:
				w.finished(st, r)
			default:
				drained = true
			}
		}
		if !waitingRetry {
			free := w.cfg.Concurrency - st.running
			claim := 0
			if st.hungry && !st.draining && free > 0 {
				claim = min(free, maxClaim)
			}
			// A round trip that reaps also renews this worker's leases first (they come
			// before the reap in the pipeline), so a worker that stalled past its leases never
			// reaps its own running jobs.
			beatNow := (st.beatDue || st.hkDue) && len(st.held) > len(st.outcomes)
			if len(st.outcomes) > 0 || claim > 0 || beatNow || st.hkDue || (st.dueCheck && !st.draining) {
				if st.beatDue || beatNow {
					st.beatDue = false
					beat.Reset(w.beat)
				}
				if w.roundTrip(st, claim, beatNow) {
					st.errWait = 0
				} else {
					st.errWait = min(max(st.errWait*2, 50*time.Millisecond), 2*time.Second)
					if st.hard {
						w.abandon(st) // the server is not answering and the deadline has passed
					} else {
						retry.Reset(st.errWait)
						waitingRetry = true
					}
				}
				continue
			}
		}
		if st.draining && st.running == 0 && len(st.outcomes) == 0 {
			return
		}
		if !st.draining && !st.hungry && !st.blocking && st.running < w.cfg.Concurrency {
			st.blocking = true
			w.blockReq <- struct{}{} // capacity 1, and only the loop sends while no block is outstanding
		}
		select {
		case r := <-w.results:
			w.finished(st, r)
		case marker := <-w.wake:
			st.blocking = false
			st.hungry = true
			if !marker {
				st.dueCheck = true // a timeout: also look at the schedule again
			}
		case <-st.due.C:
			st.dueAt = time.Time{}
			st.hungry = true
			st.dueCheck = true
		case <-beat.C:
			st.beatDue = true
			if len(st.held) == 0 {
				st.beatDue = false
				beat.Reset(w.beat)
			}
		case <-hk.C:
			st.hkDue = true
			hk.Reset(w.jitter(w.cfg.HousekeepInterval))
		case <-retry.C:
			waitingRetry = false
		case <-stop:
			stop = nil
			st.draining = true
			w.blockStop() // abort a blocked BLPOP; the blocker ends
		case <-hard:
			hard = nil
			st.hard = true
			for r := range st.held {
				if !r.finished {
					r.cancel(ErrWorkerClosed)
				}
			}
		}
	}
}

// jitter spreads d by ±20 % so that workers started together do not housekeep together.
func (w *Worker) jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return time.Hour
	}
	return d - d/5 + rand.N(2*d/5+1)
}

// step is one script of a round trip and what to do with its reply.
type step struct {
	run   lua.Run
	reply func(result) bool // false: a transport error, the round trip failed
}

// roundTrip sends one pipeline and applies the replies. It reports false when the server did
// not answer (the outcomes stay queued and are sent again).
func (w *Worker) roundTrip(st *loopState, claim int, beatNow bool) bool {
	steps := make([]step, 0, len(st.outcomes)+4)
	sending := st.outcomes
	st.outcomes = nil
	var kept []*running
	var completes []*running
	for _, r := range sending {
		if r.preErr == nil && r.err == nil {
			completes = append(completes, r)
			continue
		}
		steps = append(steps, w.outcomeStep(st, r, func() { kept = append(kept, r) }))
	}
	if len(completes) > 0 {
		steps = append(steps, w.completeStep(st, completes, func() { kept = append(kept, completes...) }))
	}
	if beatNow {
		steps = append(steps, w.extendSteps(st)...)
	}
	if st.hkDue {
		st.hkDue = false
		steps = append(steps, w.housekeepSteps(st)...)
	}
	if claim > 0 {
		steps = append(steps, w.claimStep(st, claim))
	}
	if st.dueCheck && !st.draining {
		st.dueCheck = false
		steps = append(steps, w.dueStep(st))
	}
	if len(steps) == 0 {
		return true
	}
	parent, timeout := w.hardCtx, roundTripTimeout
	if st.hard {
		parent, timeout = context.Background(), handBackTimeout
	}
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	runs := make([]lua.Run, len(steps))
	for i, s := range steps {
		runs[i] = s.run
	}
	out, err := w.b.execMulti(ctx, runs, nil)
	if err != nil || len(out) != len(steps) { // not expected without an Ack: errors come per reply
		w.log.Error("bus: worker: round trip", "err", err)
		st.outcomes = append(sending, st.outcomes...)
		st.hungry = st.hungry || claim > 0
		return false
	}
	ok := true
	for i, s := range steps {
		if !s.reply(out[i]) {
			ok = false
		}
	}
	st.outcomes = append(kept, st.outcomes...)
	return ok
}

// transient reports whether err is not the script's answer (a transport error, a timeout):
// the call may be sent again.
func transient(err error) bool {
	if err == nil {
		return false
	}
	var se *scriptError
	return !errors.As(err, &se) && !errors.Is(err, ErrWrongType)
}

// finished takes a handler's return.
func (w *Worker) finished(st *loopState, r *running) {
	r.finished = true
	st.running--
	w.running.Add(-1)
	r.cancel(nil)
	if r.stopT != nil {
		r.stopT()
	}
	if r.lost {
		delete(st.held, r) // the outcome would answer EMQSTALE: the job is someone else's
		return
	}
	st.outcomes = append(st.outcomes, r)
}
