package bus

import "time"

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
		err := c.Do(w.blockCtx, c.B().Blpop().Key(w.q.Wake()).Timeout(timeout).Build()).Error()
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
