package cache

import (
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// The L1 hit path must not read the precise clock: a monotonic clock read is of the same
// order as the whole ristretto lookup, so reading it on every hit would make the hit a good
// deal slower (BenchmarkL1Hit tracks it). Hits read a coarse clock instead, and fall back to
// the precise clock only for entries within clockGuard of a deadline (expiry or the
// early-refresh window).
//
// Two things keep the coarse clock close to the precise one. A ticker goroutine stores the
// precise time every clockTick while hits happen; but a ticker is starved exactly when the
// process is busy: with more runnable goroutines than cores it runs late, by far more than
// clockGuard. So hits also advance it themselves: every clockEvery-th hit counted on a counter
// shard stores the precise time, which costs a clock read per clockEvery hits. An entry is
// served past its deadline only if both fall behind by more than clockGuard: the process is
// starved by other work while its hits are rare.
const (
	clockTick  = time.Millisecond
	clockGuard = 20 * time.Millisecond
	clockEvery = 256 // a power of two
	// clockIdle ticks without a coarse read stop the ticker; the next read restarts it.
	clockIdle = 128
)

// clock is a monotonic clock in nanoseconds since the cache was made.
type clock struct {
	base    time.Time
	coarse  atomic.Int64 // precise() as of the last tick
	ticking atomic.Bool  // coarse is being refreshed
	used    atomic.Bool  // a coarse read happened since the ticker last looked
	wake    chan struct{}
	stop    chan struct{}
	done    sync.WaitGroup
}

func newClock() *clock {
	c := &clock{base: time.Now(), wake: make(chan struct{}, 1), stop: make(chan struct{})}
	c.done.Add(1)
	go c.keepTime()
	return c
}

// precise is the monotonic time now.
func (c *clock) precise() int64 { return int64(time.Since(c.base)) }

// now is the coarse time: at most about clockTick behind precise while the ticker keeps up.
func (c *clock) now() int64 {
	if c.ticking.Load() {
		if !c.used.Load() {
			c.used.Store(true)
		}
		return c.coarse.Load()
	}
	return c.restart()
}

// advance stores the precise time in the coarse clock (from the hit path, see clockEvery).
// It never moves the clock back.
//
//go:noinline
func (c *clock) advance() {
	now := c.precise()
	for {
		cur := c.coarse.Load()
		if now <= cur || c.coarse.CompareAndSwap(cur, now) {
			return
		}
	}
}

// restart wakes an idle ticker and answers with the precise time meanwhile.
//
//go:noinline
func (c *clock) restart() int64 {
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return c.precise()
}

// keepTime is the ticker goroutine: it stores the precise time in the coarse clock every
// clockTick while coarse reads happen, and sleeps until the next read once they stop.
func (c *clock) keepTime() {
	defer c.done.Done()
	t := time.NewTicker(clockTick)
	defer t.Stop()
	idle := 0
	for {
		c.advance()
		c.ticking.Store(true)
		select {
		case <-c.stop:
			c.ticking.Store(false)
			return
		case <-t.C:
		}
		if c.used.Swap(false) {
			idle = 0
			continue
		}
		if idle++; idle < clockIdle {
			continue
		}
		// Idle: stop refreshing until a read asks for the time again.
		c.ticking.Store(false)
		idle = 0
		select {
		case <-c.stop:
			return
		case <-c.wake:
			t.Reset(clockTick)
		}
	}
}

// stopTicking ends the ticker goroutine and waits for it.
func (c *clock) stopTicking() {
	close(c.stop)
	c.done.Wait()
}

// counter is a statistics counter for the hot path: sharded over padded cache lines so that
// goroutines on different cores do not fight over one line.
type counter struct {
	shards [counterShards]struct {
		n atomic.Int64
		_ [120]byte // 128-byte stride: also clear of the adjacent-line prefetcher
	}
}

const counterShards = 16

// incr adds n to one shard and returns that shard's new count. It picks the shard from the
// address of a stack variable: goroutines have distinct stacks, so each tends to keep to its
// own shard, which is what a per-CPU counter would give without reaching into the runtime.
func (c *counter) incr(n int64) int64 {
	var anchor byte
	h := uint64(uintptr(unsafe.Pointer(&anchor))>>12) * 0x9E3779B97F4A7C15
	return c.shards[h>>(64-4)].n.Add(n)
}

// sum is the counter's total over its shards.
func (c *counter) sum() int64 {
	var sum int64
	for i := range c.shards {
		sum += c.shards[i].n.Load()
	}
	return sum
}
