package bus

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"time"

	"github.com/echocache/echocache/lua"
)

// Internal bounds of the worker's loop.
const (
	// roundTripTimeout bounds one pipelined round trip of the loop.
	roundTripTimeout = 10 * time.Second
	// handBackTimeout bounds the last round trip after Close's deadline passed.
	handBackTimeout = 2 * time.Second
	// maxClaim bounds one claim, whatever the concurrency.
	maxClaim = 1000
	// minBeat is the shortest heartbeat interval.
	minBeat = 10 * time.Millisecond
)

// loop is the worker's one goroutine that talks to the server (besides the blocker), and its
// state: only that goroutine touches a loop. Every round trip is one pipeline of the outcomes
// of finished handlers, the heartbeat's extend, housekeeping, the claim for the free slots
// and the schedule's head, in that order. Its steps live by role: worker_steps.go (claim,
// housekeeping, the schedule's head), worker_heartbeat.go, worker_outcome.go and
// worker_exec.go (starting a claimed job).
type loop struct {
	w *Worker

	held     map[*inflight]struct{} // a job reaped from under its handler and claimed again is held twice
	outcomes []*inflight            // finished handlers whose outcome is not yet accepted
	resend   []*inflight            // outcomes of this round trip whose reply was a transport error
	unacked  error                  // the round trip's claim fell short of ClaimAck (set while its replies are applied)
	busy     int                    // handlers running

	hungry       bool          // claim when slots are free: the last claim came back full, or a wake came
	streaming    bool          // the last claim came back full: no need to read the schedule
	dueCheck     bool          // read the schedule's head at the next round trip
	blocking     bool          // a block request is outstanding
	draining     bool          // Close was called: claim nothing more, finish what is held
	pastDeadline bool          // Close's deadline passed: the handlers were cancelled
	beatDue      bool          // the heartbeat timer fired
	housekeepDue bool          // reap and promote at the next round trip
	waitingRetry bool          // a round trip failed: the next one waits for retryTimer
	errWait      time.Duration // backoff after a failed round trip

	poolSize    int  // handler goroutines started
	newHandlers bool // handlers were started since the loop last collected their returns

	// The worker's stop and hard channels; each is set to nil once received from.
	stop, hard <-chan struct{}

	beatTimer      *time.Timer // the heartbeat
	housekeepTimer *time.Timer // reap and promote; stopped when HousekeepInterval is negative
	retryTimer     *time.Timer // the backoff after a failed round trip
	dueTimer       *time.Timer // wakes the loop when scheduled work falls due
	dueAt          time.Time   // when dueTimer fires (local monotonic clock); zero when stopped
}

// newLoop is w's loop, hungry and about to read the schedule, with its timers armed.
func newLoop(w *Worker) *loop {
	l := &loop{
		w: w, held: map[*inflight]struct{}{}, stop: w.stop, hard: w.hard,
		hungry: true, dueCheck: true, housekeepDue: w.cfg.HousekeepInterval > 0,
		beatTimer:      time.NewTimer(w.beatEvery),
		housekeepTimer: time.NewTimer(jitter(w.cfg.HousekeepInterval)),
		retryTimer:     stoppedTimer(),
		dueTimer:       stoppedTimer(),
	}
	if w.cfg.HousekeepInterval < 0 {
		l.housekeepTimer.Stop()
	}
	return l
}

func stoppedTimer() *time.Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}

// run is the loop: collect what handlers returned, send a round trip when one is due, else
// wait for something to happen. It returns once Close was called and every held job is
// settled (or abandoned after Close's deadline).
func (l *loop) run() {
	defer l.stopTimers()
	for {
		l.collect()
		if l.tryRoundTrip() {
			continue
		}
		if l.drained() {
			return
		}
		l.block()
		l.wait()
	}
}

func (l *loop) stopTimers() {
	l.beatTimer.Stop()
	l.housekeepTimer.Stop()
	l.retryTimer.Stop()
	l.dueTimer.Stop()
}

// collect takes every handler return already queued. After starting handlers it yields
// first: fast handlers finish meanwhile, and their outcomes share the next round trip.
func (l *loop) collect() {
	if l.newHandlers {
		l.newHandlers = false
		runtime.Gosched()
	}
	for {
		select {
		case r := <-l.w.returns:
			l.finished(r)
		default:
			return
		}
	}
}

// finished takes a handler's return.
func (l *loop) finished(r *inflight) {
	r.returned = true
	l.busy--
	l.w.busy.Add(-1)
	r.cancel(nil)
	if r.stopTimeout != nil {
		r.stopTimeout()
	}
	if r.lost {
		delete(l.held, r) // the outcome would answer EMQSTALE: the job is someone else's
		return
	}
	l.outcomes = append(l.outcomes, r)
}

// tryRoundTrip sends a round trip when one is due and no backoff after a failed one is
// running. It reports whether it sent one; the loop then collects again before it waits.
func (l *loop) tryRoundTrip() bool {
	if l.waitingRetry {
		return false
	}
	claim, beat, due := l.plan()
	if !due {
		return false
	}
	if l.beatDue || beat {
		l.beatDue = false
		l.beatTimer.Reset(l.w.beatEvery)
	}
	if l.roundTrip(claim, beat) {
		l.errWait = 0
	} else {
		l.backOff()
	}
	return true
}

// plan decides the next round trip: how many jobs to claim (the free slots, while hungry and
// not draining) and whether the heartbeat goes along; due is false when nothing is to be sent.
func (l *loop) plan() (claim int, beat, due bool) {
	if free := l.w.cfg.Concurrency - l.busy; l.hungry && !l.draining && free > 0 {
		claim = min(free, maxClaim)
	}
	// A round trip that reaps also renews this worker's leases first (they come before the
	// reap in the pipeline), so a worker that stalled past its leases never reaps its own
	// running jobs.
	beat = (l.beatDue || l.housekeepDue) && len(l.held) > len(l.outcomes)
	due = len(l.outcomes) > 0 || claim > 0 || beat || l.housekeepDue || (l.dueCheck && !l.draining)
	return claim, beat, due
}

// backOff follows a round trip the server did not answer: the next one waits, doubling from
// 50 ms up to 2 s; past Close's deadline the outcomes are abandoned instead.
func (l *loop) backOff() {
	l.errWait = min(max(l.errWait*2, 50*time.Millisecond), 2*time.Second)
	if l.pastDeadline {
		l.abandon() // the server is not answering and the deadline has passed
		return
	}
	l.retryTimer.Reset(l.errWait)
	l.waitingRetry = true
}

// drained reports whether Close was called and nothing is held any more: the loop ends.
func (l *loop) drained() bool {
	return l.draining && l.busy == 0 && len(l.outcomes) == 0
}

// block asks the blocker to wait on the wake list when the loop is idle with a slot free.
func (l *loop) block() {
	if l.draining || l.hungry || l.blocking || l.busy >= l.w.cfg.Concurrency {
		return
	}
	l.blocking = true
	l.w.blockReq <- struct{}{} // capacity 1, and only the loop sends while no block is outstanding
}

// wait blocks until something happens: a handler returns, the wake list answers, a timer
// fires, Close is called or its deadline passes.
func (l *loop) wait() {
	select {
	case r := <-l.w.returns:
		l.finished(r)
	case marker := <-l.w.wake:
		l.blocking = false
		l.hungry = true
		if marker == "" || marker == wakeSchedule {
			// A timeout, or an enqueue moved the schedule's head earlier: read it again, so
			// the due timer fires at the new run-at.
			l.dueCheck = true
		}
	case <-l.dueTimer.C:
		l.dueAt = time.Time{}
		l.hungry = true
		l.dueCheck = true
	case <-l.beatTimer.C:
		l.beatFired()
	case <-l.housekeepTimer.C:
		l.housekeepDue = true
		l.housekeepTimer.Reset(jitter(l.w.cfg.HousekeepInterval))
	case <-l.retryTimer.C:
		l.waitingRetry = false
	case <-l.stop:
		l.stopClaiming()
	case <-l.hard:
		l.cancelHandlers()
	}
}

// beatFired makes the heartbeat due; with nothing held there is nothing to renew, and the
// timer just starts over.
func (l *loop) beatFired() {
	if len(l.held) == 0 {
		l.beatTimer.Reset(l.w.beatEvery)
		return
	}
	l.beatDue = true
}

// stopClaiming starts the drain Close asked for.
func (l *loop) stopClaiming() {
	l.stop = nil
	l.draining = true
	l.w.blockStop() // abort a blocked BLPOP; the blocker ends
}

// cancelHandlers cancels every running handler's context: Close's deadline passed.
func (l *loop) cancelHandlers() {
	l.hard = nil
	l.pastDeadline = true
	for r := range l.held {
		if !r.returned {
			r.cancel(ErrWorkerClosed)
		}
	}
}

// armDue makes the due timer fire after d unless it fires sooner already.
func (l *loop) armDue(d time.Duration) {
	at := time.Now().Add(d)
	if l.dueAt.IsZero() || at.Before(l.dueAt) || l.dueAt.Before(time.Now()) {
		l.dueTimer.Reset(d)
		l.dueAt = at
	}
}

// jitter spreads d by ±20 % so that workers started together do not housekeep together.
func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return time.Hour
	}
	return d - d/5 + rand.N(2*d/5+1)
}

// step is one script of a round trip and what to do with its reply.
type step struct {
	script lua.Run
	reply  func(result) bool // false: a transport error, the round trip failed
}

// roundTrip sends one pipeline and applies the replies. It reports false when the server did
// not answer (the outcomes stay queued and are sent again).
func (l *loop) roundTrip(claim int, beat bool) bool {
	sending := l.outcomes
	l.outcomes = nil
	steps := l.outcomeSteps(sending)
	if beat {
		steps = append(steps, l.extendSteps()...)
	}
	if l.housekeepDue {
		l.housekeepDue = false
		steps = append(steps, l.housekeepSteps()...)
	}
	if claim > 0 {
		steps = append(steps, l.claimStep(claim))
	}
	if l.dueCheck && !l.draining {
		l.dueCheck = false
		steps = append(steps, l.dueStep())
	}
	if len(steps) == 0 {
		return true
	}
	var ack *Ack
	if claim > 0 && l.w.cfg.ClaimAck.Durability != Primary {
		ack = &l.w.cfg.ClaimAck
	}
	out, unacked, err := l.send(steps, ack)
	if err != nil {
		l.w.log.Error("bus: worker: round trip", "err", err)
		l.outcomes = append(sending, l.outcomes...)
		l.hungry = l.hungry || claim > 0
		return false
	}
	ok := true
	l.unacked = unacked
	for i, s := range steps {
		if !s.reply(out[i]) {
			ok = false
		}
	}
	l.unacked = nil
	l.outcomes = append(l.resend, l.outcomes...)
	l.resend = nil
	return ok
}

// send runs the steps' scripts in one pipeline, bounded by roundTripTimeout; past Close's
// deadline (which cancelled hardCtx) by handBackTimeout instead. With ack, the pipeline is
// followed by its wait, and unacked is why the acknowledgement fell short (the replies are
// valid all the same).
func (l *loop) send(steps []step, ack *Ack) (out []result, unacked, err error) {
	parent, timeout := l.w.hardCtx, roundTripTimeout
	if l.pastDeadline {
		parent, timeout = context.Background(), handBackTimeout
	}
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	runs := make([]lua.Run, len(steps))
	for i, s := range steps {
		runs[i] = s.script
	}
	out, err = l.w.b.execMulti(ctx, runs, ack)
	if ack != nil && err != nil && len(out) == len(steps) {
		return out, err, nil // the scripts ran; their writes may not have reached a replica
	}
	if err == nil && len(out) != len(steps) { // not expected: errors come per reply
		err = protocolError("round trip", "%d replies to %d scripts", len(out), len(steps))
	}
	return out, nil, err
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
