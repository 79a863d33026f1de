package bus

import (
	"context"
	"errors"
	"time"

	"github.com/echocache/echocache/lua"
)

// The loop's round trips: what one carries, how a sender goroutine sends it, and how the loop
// applies its replies.

// roundTrip is one pipeline: built and applied by the loop, sent by a sender goroutine.
type roundTrip struct {
	steps   []step
	sending []*inflight // the outcomes it carries
	claim   int         // jobs its claim asks for
	fed     uint64      // loop.fed when it was sent
	beat    bool        // it carries the heartbeat's extends
	backoff bool        // sent while a backoff held claims back (trySend)
	ack     *Ack
	// handBackBy is set on a round trip built after Close's deadline passed: every such trip
	// ends by it, handBackTimeout after the deadline, however many there are.
	handBackBy time.Time

	// Set by the sender before it hands the round trip back.
	out     []result
	unacked error
	err     error
	flight  time.Duration // its time in flight

	arrived bool // the loop received it back
}

// step is one script of a round trip and what to do with its reply.
type step struct {
	script lua.Run
	reply  func(result) bool // false: a transport error, the round trip failed
}

// build assembles a round trip: the outcomes, the heartbeat, housekeeping, the claim and the
// schedule's head.
func (l *loop) build(claim int, beat bool) *roundTrip {
	rt := &roundTrip{sending: l.outcomes, claim: claim, beat: beat, handBackBy: l.handBackBy}
	l.outcomes = nil
	steps, completes := l.outcomeSteps(rt.sending)
	housekeep := l.housekeepDue
	if len(completes) > 0 && (claim == 0 || housekeep) {
		// Alone, or ahead of a reap: completes retire their jobs before a reap could find
		// their leases run out.
		steps = append(steps, l.completeStep(completes))
		completes = nil
	}
	if beat {
		steps = append(steps, l.extendSteps()...)
	}
	if housekeep {
		l.housekeepDue = false
		steps = append(steps, l.housekeepSteps()...)
	}
	switch {
	case claim > 0 && len(completes) > 0:
		steps = append(steps, l.completeClaimFor(completes, claim))
	case claim > 0:
		steps = append(steps, l.claimFor(claim))
	}
	if l.dueCheck && !l.draining {
		l.dueCheck = false
		steps = append(steps, l.dueStep())
	}
	if claim > 0 && l.w.cfg.ClaimAck.Durability != Primary {
		rt.ack = &l.w.cfg.ClaimAck
	}
	rt.steps = steps
	return rt
}

// sender is one of the goroutines that send round trips: each sends one at a time and hands
// it back to the loop with its replies.
func (l *loop) sender() {
	w := l.w
	for rt := range l.sends {
		began := time.Now()
		rt.out, rt.unacked, rt.err = w.send(rt.steps, rt.ack, rt.handBackBy)
		rt.flight = time.Since(began)
		w.stats.roundTripNanos.Add(int64(rt.flight))
		l.replies <- rt // capacity maxInFlight: never blocks
	}
}

// apply applies a round trip's replies. A round trip the server did not answer puts its
// outcomes back in the queue (they are sent again) and backs off.
func (l *loop) apply(rt *roundTrip) {
	l.claiming -= rt.claim
	if rt.err != nil {
		l.w.log.Error("bus: worker: round trip", "err", rt.err)
		l.outcomes = append(rt.sending, l.outcomes...)
		l.hungry = l.hungry || rt.claim > 0
		l.backOff(rt)
		return
	}
	ok := true
	l.unacked = rt.unacked
	for i, s := range rt.steps {
		if !s.reply(rt.out[i]) {
			ok = false
		}
	}
	l.unacked = nil
	if rt.claim > 0 && rt.fed != l.fed {
		l.hungry = true // a wake or a timer came while its claim was in flight (feed)
	}
	l.outcomes = append(l.resend, l.outcomes...)
	l.resend = nil
	if ok {
		// Only a round trip every script of which was answered measures the round trip: one
		// that timed out or was refused by a dead connection says nothing of the next.
		l.auto.noteTrip(rt.flight)
		if !rt.backoff {
			l.errWait = 0 // a heartbeat sent during a backoff does not end it: the next claim may fail again
		}
		if rt.beat {
			// After the extends' replies: a job they found cancelled or lost is settled
			// already, and is not handed back.
			l.releaseStalled(time.Now())
		}
	} else {
		l.backOff(rt)
	}
}

// send runs the steps' scripts in one pipeline, bounded by the worker's tripTimeout, and by
// hardCtx, which Close cancels handBackTimeout after its deadline (a round trip sent after that
// deadline has the cancel's moment as a deadline too: a connection valkey-go dials reads its
// handshake by the deadline and ignores a cancel); a round trip built past that deadline is
// bounded by handBackBy instead (non-zero then): the hand-backs of handlers that return one
// after the other share one bound, so a server that stopped answering holds Close up by
// handBackTimeout at most, not by that for every round trip. With ack, the pipeline is followed
// by its wait, and unacked is why the acknowledgement fell short (the replies are valid all the
// same). It runs on a sender goroutine and reads nothing of the loop.
func (w *Worker) send(steps []step, ack *Ack, handBackBy time.Time) (out []result, unacked, err error) {
	parent, deadline := w.hardCtx, w.hardBound(time.Now().Add(w.tripTimeout))
	if !handBackBy.IsZero() {
		parent, deadline = context.Background(), handBackBy
	}
	ctx, cancel := context.WithDeadline(parent, deadline)
	defer cancel()
	runs := make([]lua.Run, len(steps))
	for i, s := range steps {
		runs[i] = s.script
	}
	out, err = w.b.execMulti(ctx, runs, ack)
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
