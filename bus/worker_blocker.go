package bus

import (
	"context"
	"time"
)

// blockSlack is how long past the server's BLPOP timeout the blocker waits for its reply
// before it gives the connection up: a node that is paused or cut off keeps the connection
// open and answers nothing, and a failover may meanwhile have moved the queue elsewhere.
const blockSlack = time.Second

// blocker blocks on the wake list when the loop asks, and answers on w.wake.
func (w *Worker) blocker() {
	timeout := w.cfg.WakeTimeout.Seconds()
	backoff := 50 * time.Millisecond
	for {
		select {
		case <-w.blockReq:
		case <-w.blockCtx.Done():
			return
		}
		c := w.b.client
		// valkey-go closes a blocking command's connection when its context ends first, so
		// the next wait dials the slot's owner afresh. A cancel, not a deadline: valkey-go
		// reads a blocking command with a deadline synchronously, and Close's cancel of
		// blockCtx would then wait for that deadline.
		ctx, cancel := context.WithCancel(w.blockCtx)
		giveUp := time.AfterFunc(w.cfg.WakeTimeout+blockSlack, cancel)
		err := c.Do(ctx, c.B().Blpop().Key(w.q.Wake()).Timeout(timeout).Build()).Error()
		giveUp.Stop()
		cancel()
		if w.blockCtx.Err() != nil {
			return
		}
		marker := err == nil
		if err != nil && !isNil(err) {
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
			marker = true
		} else {
			backoff = 50 * time.Millisecond
		}
		select {
		case w.wake <- marker:
		case <-w.blockCtx.Done():
			return
		}
	}
}
