package bus

import (
	"context"
	"math"
	"time"
)

// blockSlack is how long past the server's BLPOP timeout the blocker waits for its reply
// before it gives the connection up: a node that is paused or cut off keeps the connection
// open and answers nothing, and a failover may meanwhile have moved the queue elsewhere.
const blockSlack = time.Second

// The values of the wake list's markers (FORMAT wake, in lua/enqueue.lua).
const (
	// wakeWork: a job became pending. Claim.
	wakeWork = "1"
	// wakeSchedule: an enqueue moved the schedule's head earlier. Read the head again, so the
	// due timer fires at the new run-at, and claim.
	wakeSchedule = "s"
)

// giveBack hands a marker the worker popped but has no room to act on back to the blocker,
// which pushes it to the wake list again for an idle worker. The loop calls it only after the
// blocker answered, so at most one marker waits; another would be dropped (a marker is a hint).
func (w *Worker) giveBack(marker string) {
	select {
	case w.given <- marker:
	default:
	}
}

// pushBack pushes marker to the head of the wake list as the scripts push one (LPUSH, then
// LTRIM to 16; FORMAT wake), bounded by blockSlack; a failure is logged and the marker lost:
// the idle workers' wake timeout covers it.
func (w *Worker) pushBack(marker string) {
	ctx, cancel := context.WithTimeout(w.blockCtx, blockSlack)
	defer cancel()
	c := w.b.client
	for _, r := range c.DoMulti(ctx, c.B().Lpush().Key(w.q.Wake()).Element(marker).Build(), c.B().Ltrim().Key(w.q.Wake()).Start(0).Stop(15).Build()) {
		if err := r.Error(); err != nil {
			if w.blockCtx.Err() == nil {
				w.log.Error("bus: worker: giving a wake marker back", "err", err)
			}
			return
		}
	}
}

// blocker blocks on the wake list when the loop asks, and answers on w.wake with the marker it
// popped: "" for a timeout, wakeWork after an error (the loop then claims, which finds out).
func (w *Worker) blocker() {
	timeout := w.cfg.WakeTimeout.Seconds()
	giveUpAfter := w.cfg.WakeTimeout + blockSlack
	if giveUpAfter < w.cfg.WakeTimeout { // overflowed: a WakeTimeout near the largest Duration
		giveUpAfter = math.MaxInt64
	}
	backoff := 50 * time.Millisecond
	for {
		select {
		case <-w.blockReq:
		case marker := <-w.given:
			w.pushBack(marker)
			continue
		case <-w.blockCtx.Done():
			return
		}
		c := w.b.client
		// valkey-go closes a blocking command's connection when its context ends first, so
		// the next wait dials the slot's owner afresh. A cancel, not a deadline: valkey-go
		// reads a blocking command with a deadline synchronously, and Close's cancel of
		// blockCtx would then wait for that deadline.
		ctx, cancel := context.WithCancel(w.blockCtx)
		giveUp := time.AfterFunc(giveUpAfter, cancel)
		popped, err := c.Do(ctx, c.B().Blpop().Key(w.q.Wake()).Timeout(timeout).Build()).AsStrSlice()
		giveUp.Stop()
		cancel()
		if w.blockCtx.Err() != nil {
			return
		}
		marker := wakeWork
		switch {
		case err != nil && !isNil(err):
			// The server is unreachable or refused: wait before the loop tries again, so a
			// dead server does not make the worker spin.
			w.log.Error("bus: worker: waiting on the wake list", "err", err)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-w.blockCtx.Done():
				t.Stop()
				return
			}
			backoff = min(backoff*2, w.cfg.WakeTimeout)
		case err != nil:
			marker, backoff = "", 50*time.Millisecond // a timeout
		default:
			backoff = 50 * time.Millisecond
			if len(popped) == 2 { // the key, the marker
				marker = popped[1]
			}
		}
		select {
		case w.wake <- marker:
		case <-w.blockCtx.Done():
			return
		}
	}
}
