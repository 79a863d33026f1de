package bus

import (
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"
)

// Internal bounds of the worker's loop.
const (
	// maxTripTimeout and minTripTimeout bound the time one pipelined round trip of the loop
	// may take (Worker.tripTimeout, half the shortest lease between them).
	maxTripTimeout = 10 * time.Second
	minTripTimeout = time.Second
	// handBackTimeout bounds the round trips sent after Close's deadline passed, all of them
	// together.
	handBackTimeout = 2 * time.Second
	// maxClaim bounds one claim, whatever the concurrency.
	maxClaim = 1000
	// minBeat is the shortest heartbeat interval.
	minBeat = 10 * time.Millisecond
	// maxInFlight bounds the round trips in flight: while this many wait for their replies,
	// finished handlers' outcomes queue up for the next one (back-pressure), so a round trip
	// carries more the busier the server is. Two keep the client and the server both busy: one
	// round trip is on the server while the worker applies the replies of the other and
	// gathers the next.
	maxInFlight = 2
)

// loop is the worker's one goroutine that decides what to send (besides the blocker), and its
// state: only that goroutine touches a loop. A round trip is one pipeline of the outcomes of
// finished handlers, the heartbeat's extend, housekeeping, the claim for the free slots and
// the schedule's head, in that order (the completes and the claim in one completeclaim when
// both are due and no housekeeping goes along). Up to maxInFlight round trips are in flight at
// once, each sent by a sender goroutine; their replies are applied on the loop in the order the
// round trips were sent. Its steps live by role: worker_steps.go (claim, housekeeping, the
// schedule's head), worker_heartbeat.go, worker_outcome.go and worker_exec.go (running the
// claimed jobs).
type loop struct {
	w  *Worker
	ex *executor

	held     map[*inflight]struct{} // a job reaped from under its handler and claimed again is held twice
	outcomes []*inflight            // finished handlers whose outcome is not yet sent
	resend   []*inflight            // outcomes of the round trip being applied whose reply was a transport error
	unacked  error                  // the round trip's claim fell short of ClaimAck (set while its replies are applied)
	busy     int                    // jobs handed to the executor whose return the loop has not taken
	claiming int                    // jobs asked for by the claims of the round trips in flight
	returns  []*inflight            // scratch for collect

	trips   []*roundTrip    // in flight, in send order
	sends   chan *roundTrip // to the senders; capacity maxInFlight
	replies chan *roundTrip // from the senders; capacity maxInFlight
	senders sync.WaitGroup

	auto       autoPrefetch // the automatic prefetch buffer's means (worker_prefetch.go)
	lastReturn time.Time    // when a handler last returned, or the loop started

	lanes        bool          // the queue keeps lane state: claims go to laneclaim (worker_lanes.go)
	hungry       bool          // claim when slots are free: the last claim came back full, or a wake came
	fed          uint64        // how many times a wake or a timer made the loop hungry (feed)
	streaming    bool          // the last claim came back full: no need to read the schedule
	dueCheck     bool          // read the schedule's head at the next round trip
	blocking     bool          // a block request is outstanding
	draining     bool          // Close was called: claim nothing more, finish what is held
	pastDeadline bool          // Close's deadline passed: the handlers were cancelled
	handBackBy   time.Time     // then: when every round trip still to send must end
	beatDue      bool          // the heartbeat timer fired
	housekeepDue bool          // reap and promote at the next round trip
	waitingRetry bool          // a round trip failed: the next one waits for retryTimer
	errWait      time.Duration // backoff after a failed round trip
	newHandlers  bool          // jobs were handed to the executor since the loop last collected

	// The worker's stop and hard channels; each is set to nil once received from.
	stop, hard <-chan struct{}

	beatTimer      *time.Timer // the heartbeat
	housekeepTimer *time.Timer // reap and promote; stopped when HousekeepInterval is negative
	retryTimer     *time.Timer // the backoff after a failed round trip
	dueTimer       *time.Timer // wakes the loop when scheduled work falls due
	dueAt          time.Time   // when dueTimer fires (local monotonic clock); zero when stopped
	laneTimer      *time.Timer // wakes the loop when a held-back lane may give work (worker_lanes.go)
	laneAt         time.Time   // when laneTimer fires; zero when stopped

	// dueAgain is the wait before the loop reads again a schedule head that was due already
	// (dueStep); it doubles while the head stays due.
	dueAgain time.Duration
}

// newLoop is w's loop, hungry and about to read the schedule, with its timers armed.
func newLoop(w *Worker) *loop {
	l := &loop{
		w: w, ex: newExecutor(w), held: map[*inflight]struct{}{}, stop: w.stop, hard: w.hard,
		sends: make(chan *roundTrip, maxInFlight), replies: make(chan *roundTrip, maxInFlight),
		hungry: true, dueCheck: true, housekeepDue: w.cfg.HousekeepInterval > 0,
		beatTimer:      time.NewTimer(w.beatEvery),
		housekeepTimer: time.NewTimer(jitter(w.cfg.HousekeepInterval)),
		retryTimer:     stoppedTimer(),
		dueTimer:       stoppedTimer(),
		laneTimer:      stoppedTimer(),
		lastReturn:     time.Now(),
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

// run is the loop: collect what handlers returned, apply the replies that came back, send a
// round trip when one is due and there is room for it, else wait for something to happen. It
// returns once Close was called and every held job is settled (or abandoned after Close's
// deadline), the senders and the executor's pool having ended.
func (l *loop) run() {
	for range maxInFlight {
		l.senders.Go(l.sender)
	}
	defer func() {
		close(l.sends)
		l.senders.Wait()
		l.ex.close()
		l.stopTimers()
	}()
	for {
		l.collect()
		l.applyReplies()
		if l.trySend() {
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
	l.laneTimer.Stop()
}

// capacity is how many jobs the worker holds at most before their handlers return: a slot
// for each handler and the prefetch buffer (worker_prefetch.go).
func (l *loop) capacity() int { return l.w.cfg.Concurrency + l.buffer() }

// collect takes every handler return already queued. After handing out jobs it yields first:
// fast handlers finish meanwhile, and their outcomes share the next round trip.
func (l *loop) collect() {
	if l.newHandlers {
		l.newHandlers = false
		runtime.Gosched()
	}
	select {
	case <-l.ex.notify:
	default:
	}
	l.returns = l.ex.take(l.returns[:0])
	for _, r := range l.returns {
		l.finished(r)
	}
	clear(l.returns)
}

// finished takes a handler's return.
func (l *loop) finished(r *inflight) {
	r.returned = true
	l.busy--
	if r.started && r.h != nil {
		l.auto.noteHandler(r.dur)
		l.lastReturn = time.Now()
	}
	if r.lost {
		delete(l.held, r) // the outcome would answer EMQSTALE: the job is someone else's
		return
	}
	l.outcomes = append(l.outcomes, r)
}

// applyReplies applies the round trips that came back, in the order they were sent: one that
// came back before an earlier one waits for it.
func (l *loop) applyReplies() {
	for {
		select {
		case rt := <-l.replies:
			rt.arrived = true
			continue
		default:
		}
		break
	}
	for len(l.trips) > 0 && l.trips[0].arrived {
		rt := l.trips[0]
		l.trips[0] = nil
		l.trips = l.trips[1:]
		l.apply(rt)
	}
}

// trySend sends a round trip when one is due and there is room in flight for it; while a
// backoff after a failed one runs, only a round trip that carries the heartbeat. It reports
// whether it sent one; the loop then collects again before it waits.
func (l *loop) trySend() bool {
	if len(l.trips) >= maxInFlight {
		return false
	}
	claim, beat, due := l.plan()
	if l.waitingRetry {
		// A backoff holds claims back, not the heartbeat: a claim that fell short of
		// ClaimAck backs off on a primary that answers, and the jobs already running keep
		// their leases (the round trip takes the outcomes waiting, too).
		if !beat {
			return false
		}
		claim = 0
	}
	if !due {
		return false
	}
	if l.beatDue || beat {
		l.beatDue = false
		l.beatTimer.Reset(l.w.beatEvery)
	}
	rt := l.build(claim, beat)
	rt.backoff = l.waitingRetry
	if len(rt.steps) == 0 {
		return false
	}
	l.claiming += rt.claim
	rt.fed = l.fed
	l.trips = append(l.trips, rt)
	l.w.stats.roundTrips.Add(1)
	l.sends <- rt // capacity maxInFlight, and at most maxInFlight are in flight: never blocks
	return true
}

// plan decides the next round trip: how many jobs to claim (the room left for jobs, while
// hungry and not draining, less what the claims in flight ask for) and whether the heartbeat
// goes along; due is false when nothing is to be sent.
func (l *loop) plan() (claim int, beat, due bool) {
	if free := l.capacity() - l.busy - l.claiming; l.hungry && !l.draining && free > 0 {
		// A claim asks for at most its share of the room (half, with two in flight), so the
		// jobs of one claim run while the next claim is on the server: the client and the
		// server work at once instead of taking turns.
		claim = min(free, maxClaim, (l.capacity()+maxInFlight-1)/maxInFlight)
	}
	// A round trip that reaps also renews this worker's leases first (they come before the
	// reap in the pipeline), so a worker that stalled past its leases never reaps its own
	// running jobs.
	beat = (l.beatDue || l.housekeepDue) && len(l.held) > len(l.outcomes)
	due = len(l.outcomes) > 0 || claim > 0 || beat || l.housekeepDue || (l.dueCheck && !l.draining)
	return claim, beat, due
}

// backOff follows a round trip rt the server did not answer: the next one waits, doubling
// from 50 ms up to 2 s. Past Close's deadline, the outcomes of a round trip sent before it go
// out again at once, within handBackTimeout; those of a round trip sent after it are
// abandoned.
func (l *loop) backOff(rt *roundTrip) {
	l.errWait = min(max(l.errWait*2, 50*time.Millisecond), 2*time.Second)
	if l.pastDeadline {
		if rt.handBackBy.IsZero() {
			return // sent before the deadline: send again, bounded by handBackBy
		}
		l.abandon() // the server is not answering and the deadline has passed
		return
	}
	l.retryTimer.Reset(l.errWait)
	l.waitingRetry = true
}

// drained reports whether Close was called and nothing is held nor in flight any more: the
// loop ends.
func (l *loop) drained() bool {
	return l.draining && l.busy == 0 && len(l.outcomes) == 0 && len(l.trips) == 0
}

// feed makes the loop hungry for an event from outside its round trips (a wake, a timer). A
// claim in flight was sent before it and cannot have seen the work it announces, so that
// claim's reply leaves the loop hungry (apply): its wake marker is spent, and the loop would
// else block past the work until the wake timeout.
func (l *loop) feed() {
	l.hungry = true
	l.fed++
}

// block asks the blocker to wait on the wake list when the loop is idle with room for jobs
// and no claim in flight.
func (l *loop) block() {
	if l.draining || l.hungry || l.blocking || l.claiming > 0 || l.busy >= l.capacity() {
		return
	}
	l.blocking = true
	l.w.blockReq <- struct{}{} // capacity 1, and only the loop sends while no block is outstanding
}

// wait blocks until something happens: a handler returns, a round trip comes back, the wake
// list answers, a timer fires, Close is called or its deadline passes.
func (l *loop) wait() {
	select {
	case <-l.ex.notify:
	case rt := <-l.replies:
		rt.arrived = true
	case marker := <-l.w.wake:
		l.blocking = false
		l.feed()
		if marker != "" && l.capacity()-l.busy-l.claiming <= 0 {
			// A block that was outstanding when a timer's claim filled the worker popped it:
			// give it back for an idle worker of the queue (FORMAT wake), which would else
			// sleep through it.
			l.w.giveBack(marker)
		}
		if marker == "" || marker == wakeSchedule {
			// A timeout, or an enqueue moved the schedule's head earlier: read it again, so
			// the due timer fires at the new run-at.
			l.dueCheck = true
		}
	case <-l.laneTimer.C:
		l.laneFired()
	case <-l.dueTimer.C:
		l.dueAt = time.Time{}
		l.feed()
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

// stopClaiming starts the drain Close asked for: jobs already held still run.
func (l *loop) stopClaiming() {
	l.stop = nil
	l.draining = true
	l.w.blockStop() // abort a blocked BLPOP; the blocker ends
}

// cancelHandlers cancels every running handler's context and hands back the jobs that wait
// for a pool goroutine: Close's deadline passed.
func (l *loop) cancelHandlers() {
	l.hard = nil
	if l.stop != nil {
		// Close closes stop just before hard, and the select may take hard first: a claim
		// sent now would only bring back jobs to hand back, each with an attempt spent.
		l.stopClaiming()
	}
	l.pastDeadline = true
	l.handBackBy = time.Now().Add(handBackTimeout)
	// What waits for a backoff goes out now: every round trip from here on ends by handBackBy.
	l.waitingRetry = false
	l.retryTimer.Stop()
	for r := range l.held {
		if r.returned || r.lost {
			continue
		}
		if l.ex.drop(r) {
			l.busy--
			l.handBack(r)
			continue
		}
		l.ex.cancelRunning(r, ErrWorkerClosed)
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
	d = min(d, math.MaxInt64/2) // past it d+d/5 overflows; as good as never all the same
	return d - d/5 + rand.N(2*(d/5)+1)
}
