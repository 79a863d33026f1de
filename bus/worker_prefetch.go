package bus

import "time"

// The prefetch buffer's automatic size (WorkerConfig.Prefetch 0, the default). A buffer pays
// for itself only while slots free faster than a claim comes back: with handlers of mean run
// time h and round trips of mean time t, the worker's Concurrency slots free about
// Concurrency × t / h jobs while one claim is in flight, and a buffer of that many lets each
// freed slot start its next job at once instead of after a round trip. So the automatic
// buffer is that many, at most Concurrency (and MaxPrefetch): a buffered job then waits about
// one round trip on average, and a worker whose handlers run longer than Concurrency round
// trips buffers nothing. Both means are moving averages kept by the loop, of the handlers that
// returned and of the round trips whose every script was answered.
//
// The handler mean learns from handlers that returned, so handlers that were fast and then
// stall would keep the buffer's jobs, leased, for as long as they stall. When no handler
// returned for a heartbeat interval (at least stallFloor), the heartbeat's round trip, once its
// extends are answered, hands back the jobs buffered that long: to pending, where another
// worker may take them (or this one, once a slot frees). The running handlers' times so far
// count in the mean, which shrinks the buffer.

// prefetchWeight is the weight of a new sample in the moving averages: the buffer follows a
// change of the handlers' pace within about ten jobs.
const prefetchWeight = 0.1

// minHandlerNanos keeps a handler's mean run time from reading as zero: a no-op handler is
// measured at about the timer's resolution.
const minHandlerNanos = 100

// stallFloor is the shortest time without a handler's return that counts as a stall.
const stallFloor = time.Second

// autoPrefetch is the automatic buffer's state, owned by the loop.
type autoPrefetch struct {
	handler float64 // mean handler run time, ns; 0 until one handler returned
	trip    float64 // mean round trip time, ns; 0 until one round trip came back
}

// noteHandler takes the run time of a handler that returned.
func (a *autoPrefetch) noteHandler(d time.Duration) {
	a.handler = mean(a.handler, float64(max(d, minHandlerNanos)))
}

// noteTrip takes the time a round trip was in flight.
func (a *autoPrefetch) noteTrip(d time.Duration) { a.trip = mean(a.trip, float64(max(d, 1))) }

// size is the buffer for concurrency slots: none until both means have a sample.
func (a *autoPrefetch) size(concurrency int) int {
	if a.handler == 0 || a.trip == 0 {
		return 0
	}
	n := float64(concurrency) * a.trip / a.handler
	return int(min(n, float64(concurrency), MaxPrefetch))
}

func mean(avg, sample float64) float64 {
	if avg == 0 {
		return sample
	}
	return avg + prefetchWeight*(sample-avg)
}

// buffer is the prefetch buffer's size now: the configured one, or the automatic one.
func (l *loop) buffer() int {
	if !l.w.autoPrefetch {
		return l.w.prefetch
	}
	n := l.auto.size(l.w.cfg.Concurrency)
	l.w.stats.prefetch.Store(int64(n))
	return n
}

// releaseStalled hands the automatic buffer's jobs back when no handler returned for a
// heartbeat interval (at least stallFloor) and they waited that long themselves, counting the
// running handlers' times so far in the handler mean. It runs when a round trip carrying the
// heartbeat was answered, after the handler returns were collected: a job its extends found
// cancelled or lost is settled already. Each hand-back is a snooze to pending, in the next
// round trip: the claim counts as an attempt, as any hand-back's does.
func (l *loop) releaseStalled(now time.Time) {
	stall := max(l.w.beatEvery, stallFloor)
	if !l.w.autoPrefetch || now.Sub(l.lastReturn) < stall {
		return
	}
	var running []time.Duration
	var waiting []*inflight
	l.ex.mu.Lock() // the handlers' start marks
	for r := range l.held {
		switch {
		case r.returned || r.lost || r.cancelled:
		case r.started:
			running = append(running, now.Sub(r.since))
		case !r.dropped && now.Sub(r.claimed) >= stall: // not one claimed after an idle spell
			waiting = append(waiting, r)
		}
	}
	l.ex.mu.Unlock()
	if len(waiting) == 0 {
		return
	}
	for _, d := range running {
		l.auto.noteHandler(d)
	}
	released := 0
	for _, r := range waiting {
		if l.ex.drop(r) { // else a pool goroutine took it meanwhile
			l.busy--
			l.handBack(r)
			released++
		}
	}
	l.lastReturn = now // the next release waits for another whole interval
	l.w.log.Warn("bus: worker: handlers stalled; buffered jobs handed back",
		"jobs", released, "running", len(running))
}
