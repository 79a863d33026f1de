package bus_test

import (
	"context"
	"github.com/echocache/echocache/keys"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
)

// TestWorkerPrefetchAutoFast: with the default Prefetch, a worker whose handlers return at
// once (far faster than a round trip) grows its buffer to its Concurrency: once 2,000 no-op
// jobs ran, jobs whose handlers block are claimed up to 4 running and 4 buffered, and the
// buffered ones run once the running ones return.
func TestWorkerPrefetchAutoFast(t *testing.T) {
	t.Parallel()
	c := valkeytest.Shared(t).Client(t)
	b := newBus(t, c, bus.Config{})
	ctx := context.Background()
	name := valkeytest.TestName(t)
	const concurrency = 4
	w, hold := learnedWorker(t, b, bus.WorkerConfig{Queue: name, Concurrency: concurrency}, 2000, nil)
	require.Equal(t, concurrency, w.Stats().Prefetch, "no-op handlers: a buffer as large as the slots")

	holdSlotsAndBuffer(t, b, name, concurrency)
	time.Sleep(50 * time.Millisecond) // the worker claims no more than that meanwhile
	cs, err := b.Counts(ctx, name)
	require.NoError(t, err)
	require.EqualValues(t, 2*concurrency, cs.Active)
	require.EqualValues(t, concurrency, cs.Pending)
	require.Equal(t, concurrency, w.Stats().Running, "the buffered jobs wait for a slot")
	hold.open()
	drained(t, b, name, time.Minute)
	// The server's counts drain before the worker applies the last complete's reply.
	valkeytest.Eventually(t, time.Minute, "every complete accepted", func() bool {
		return w.Stats().Completed == 2000+3*concurrency
	})
}

// TestWorkerPrefetchAutoSlow: with the default Prefetch, a worker whose handlers run far
// longer than a round trip buffers nothing: the server never sees it hold more jobs than its
// slots, so a second worker started later takes its share of a shallow queue at once. The
// automatic buffer is Concurrency × (mean round trip) / (mean handler time), so the handlers
// must outlast Concurrency round trips by far: with 40 ms handlers a mean round trip of 20 ms,
// which -race on a loaded machine reaches, made a buffer of 1 and a third active job.
func TestWorkerPrefetchAutoSlow(t *testing.T) {
	t.Parallel()
	c := valkeytest.Shared(t).Client(t)
	b := newBus(t, c, bus.Config{})
	ctx := context.Background()
	name := valkeytest.TestName(t)
	const concurrency = 2
	slow := func(context.Context, *bus.Task[args]) error { time.Sleep(400 * time.Millisecond); return nil }
	enqueueTasks(t, b, name, "slow", 20, "")
	first := startWorker(t, b, bus.WorkerConfig{Queue: name, Concurrency: concurrency}, func(w *bus.Worker) {
		bus.MustHandle(w, "slow", slow, nil)
	})
	valkeytest.Eventually(t, time.Minute, "a few handlers to return", func() bool { return first.Stats().Completed >= 4 })
	for range 10 {
		cs, err := b.Counts(ctx, name)
		require.NoError(t, err)
		require.LessOrEqual(t, cs.Active, int64(concurrency), "a worker of slow handlers holds no job beyond its slots")
		require.Zero(t, first.Stats().Prefetch)
		time.Sleep(10 * time.Millisecond)
	}
	second := startWorker(t, b, bus.WorkerConfig{Queue: name, Concurrency: concurrency}, func(w *bus.Worker) {
		bus.MustHandle(w, "slow", slow, nil)
	})
	drained(t, b, name, time.Minute)
	require.Positive(t, second.Stats().Completed, "the second worker found jobs the first had not taken")
	require.Zero(t, first.Stats().Prefetch)
	valkeytest.Eventually(t, time.Minute, "every complete accepted", func() bool {
		return first.Stats().Completed+second.Stats().Completed == 20
	})
}

// TestWorkerPrefetchAutoStall: handlers that were fast and then stall do not keep the automatic
// buffer's jobs. A worker with 4 slots learns on 2,000 no-op jobs, idles for more than a
// second, then claims 8 jobs whose handlers block (4 running, 4 buffered); the idle spell is no
// stall: half a second on, nothing was handed back. Once no handler returned for a heartbeat
// interval (at least a second), the heartbeat hands the 4 buffered jobs back, the buffer
// shrinks to none and the worker claims nothing more while its handlers stall; a second worker
// runs the 8 jobs the first does not hold, the 4 handed back under token 2.
func TestWorkerPrefetchAutoStall(t *testing.T) {
	t.Parallel()
	c := valkeytest.Shared(t).Client(t)
	b := newBus(t, c, bus.Config{})
	ctx := context.Background()
	name := valkeytest.TestName(t)
	const concurrency = 4
	first, hold := learnedWorker(t, b, bus.WorkerConfig{Queue: name, Concurrency: concurrency, Lease: 900 * time.Millisecond}, 2000, nil)
	require.Equal(t, concurrency, first.Stats().Prefetch)
	time.Sleep(1200 * time.Millisecond) // idle for longer than a stall: no stall all the same

	holdSlotsAndBuffer(t, b, name, concurrency)
	time.Sleep(500 * time.Millisecond) // more than a heartbeat interval (300 ms), less than a stall
	require.Zero(t, first.Stats().HandedBack, "jobs claimed after an idle spell are not stalled ones")
	valkeytest.Eventually(t, time.Minute, "the buffered jobs to be handed back", func() bool {
		return first.Stats().HandedBack == concurrency
	})
	s := first.Stats()
	require.EqualValues(t, 2000+2*concurrency, s.Claimed, "4 running and 4 buffered were claimed")
	require.Zero(t, s.Prefetch, "the stalled handlers' times shrink the buffer")
	time.Sleep(300 * time.Millisecond)
	require.EqualValues(t, 2000+2*concurrency, first.Stats().Claimed, "no claim while every slot stalls")
	cs, err := b.Counts(ctx, name)
	require.NoError(t, err)
	require.EqualValues(t, concurrency, cs.Active)
	require.EqualValues(t, 2*concurrency, cs.Pending)

	tokens := make(chan int64, 2*concurrency)
	second := startWorker(t, b, bus.WorkerConfig{Queue: name, Concurrency: concurrency}, func(w *bus.Worker) {
		bus.MustHandle(w, "hold", func(_ context.Context, task *bus.Task[args]) error { tokens <- task.Job.Token; return nil }, nil)
	})
	valkeytest.Eventually(t, time.Minute, "the second worker to run the 8 jobs", func() bool {
		return second.Stats().Completed == 2*concurrency
	})
	close(tokens)
	again := 0
	for tok := range tokens {
		if tok == 2 {
			again++
		}
	}
	require.Equal(t, concurrency, again, "the handed-back jobs run under their second claim")
	hold.open()
	drained(t, b, name, time.Minute)
	valkeytest.Eventually(t, time.Minute, "every complete accepted", func() bool {
		return first.Stats().Completed == 2000+concurrency
	})
}

// TestWorkerPrefetchAutoStallCancelled: a buffered job cancelled while its worker's handlers
// stall is failed (to dead, as cancelled), not handed back: the stall's hand-back comes after
// the heartbeat's extends are answered, and the extend that finds the job cancelled settles it
// first. Before, the hand-back was queued when the heartbeat fired, its snooze was refused
// (a cancelling job is not active) and the job sat cancelling, holding its lease, until a reap.
func TestWorkerPrefetchAutoStallCancelled(t *testing.T) {
	t.Parallel()
	c := valkeytest.Shared(t).Client(t)
	b := newBus(t, c, bus.Config{})
	ctx := context.Background()
	name := valkeytest.TestName(t)
	var running atomic.Value
	var cancelled atomic.Bool
	first, hold := learnedWorker(t, b, bus.WorkerConfig{Queue: name, Concurrency: 1, Lease: 3 * time.Second, HousekeepInterval: -1,
		OnEvent: func(e bus.JobEvent) {
			// Heartbeat 1 s, stall 1 s: the release comes with a later heartbeat; the buffered
			// job is cancelled after the first extend that renewed it.
			if e.Kind != "hold" || e.Type != bus.JobExtended {
				return
			}
			if r, _ := running.Load().(keys.JobID); r != e.Job.ID && !cancelled.Swap(true) {
				go func() {
					if _, err := b.Cancel(ctx, name, e.Job.ID); err != nil {
						t.Errorf("cancel: %v", err)
					}
				}()
			}
		}}, 500, func(task *bus.Task[args]) { running.Store(task.Job.ID) })
	require.Equal(t, 1, first.Stats().Prefetch)
	enqueueTasks(t, b, name, "hold", 2, "")
	valkeytest.Eventually(t, 10*time.Second, "the cancel and the release", func() bool {
		s := first.Stats()
		return cancelled.Load() && (s.Cancelled+s.Stale+s.HandedBack) > 0
	})
	time.Sleep(200 * time.Millisecond)
	cs, err := b.Counts(ctx, name)
	require.NoError(t, err)
	s := first.Stats()
	hold.open()
	require.Zero(t, s.Stale, "the cancelled buffered job is failed, not handed back")
	require.EqualValues(t, 1, s.Cancelled)
	require.EqualValues(t, 1, cs.Dead, "the cancelled job went to dead at once")
	require.EqualValues(t, 1, cs.Active, "only the running job is held")
}

// learnedWorker starts a worker of cfg that handles "fast" (a no-op) and "hold" (calls onHold
// when set, then waits on the gate it returns, which opens before the worker's Close), and
// runs fast no-op jobs through it so that its automatic buffer has learned their times.
func learnedWorker(t *testing.T, b *bus.Bus, cfg bus.WorkerConfig, fast int, onHold func(*bus.Task[args])) (*bus.Worker, *gate) {
	t.Helper()
	hold := &gate{ch: make(chan struct{})}
	enqueueTasks(t, b, cfg.Queue, "fast", fast, "")
	w := startWorker(t, b, cfg, func(w *bus.Worker) {
		bus.MustHandle(w, "fast", func(context.Context, *bus.Task[args]) error { return nil }, nil)
		bus.MustHandle(w, "hold", func(ctx context.Context, task *bus.Task[args]) error {
			if onHold != nil {
				onHold(task)
			}
			return hold.wait(ctx)
		}, nil)
	})
	t.Cleanup(hold.open) // before the worker's Close, which waits for the handlers
	drained(t, b, cfg.Queue, time.Minute)
	return w, hold
}

// holdSlotsAndBuffer enqueues 3 × concurrency jobs that hold, and waits until the worker holds
// 2 × concurrency of them: its slots and its buffer.
func holdSlotsAndBuffer(t *testing.T, b *bus.Bus, queue string, concurrency int) {
	t.Helper()
	enqueueTasks(t, b, queue, "hold", 3*concurrency, "")
	valkeytest.Eventually(t, time.Minute, "the worker to hold its slots and its buffer", func() bool {
		cs, err := b.Counts(context.Background(), queue)
		require.NoError(t, err)
		return cs.Active == int64(2*concurrency)
	})
}

// gate holds the handlers that wait on it until it opens, or until their context ends.
type gate struct {
	ch   chan struct{}
	once sync.Once
}

func (g *gate) open() { g.once.Do(func() { close(g.ch) }) }

func (g *gate) wait(ctx context.Context) error {
	select {
	case <-g.ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
