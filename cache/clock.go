package cache

import (
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// The L1 hit path must not read the precise clock: on the machines this library is measured
// on, a monotonic clock read costs about as much as the whole ristretto lookup. Hits read a
// coarse clock instead, which a ticker goroutine refreshes every clockTick while hits
// happen, and they fall back to the precise clock only for entries within clockGuard of a
// deadline (expiry or the early-refresh window). So an entry is served past its deadline
// only if the ticker is starved for longer than clockGuard.
const (
	clockTick  = time.Millisecond
	clockGuard = 10 * time.Millisecond
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
	go c.run()
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

func (c *clock) run() {
	defer c.done.Done()
	t := time.NewTicker(clockTick)
	defer t.Stop()
	idle := 0
	for {
		c.coarse.Store(c.precise())
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

func (c *clock) close() {
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

// add picks a shard from the address of a stack variable: goroutines have distinct stacks,
// so each tends to keep to its own shard, which is what a per-CPU counter would give without
// reaching into the runtime.
func (c *counter) add(n int64) {
	var anchor byte
	h := uint64(uintptr(unsafe.Pointer(&anchor))>>12) * 0x9E3779B97F4A7C15
	c.shards[h>>(64-4)].n.Add(n)
}

func (c *counter) load() int64 {
	var sum int64
	for i := range c.shards {
		sum += c.shards[i].n.Load()
	}
	return sum
}
