package bus_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// consistency is a test-only read, atomic on the node that owns the queue: how many members
// of pending, active, schedule and dead have no row, and how many rows are in none of them.
const consistency = `
local orphans, rows = 0, 0
for i = 1, 4 do
  for _, id in ipairs(redis.call('ZRANGE', KEYS[i], 0, -1)) do
    if redis.call('EXISTS', ARGV[1] .. id) == 0 then orphans = orphans + 1 end
  end
end
for _, k in ipairs(redis.call('KEYS', ARGV[1] .. '*')) do
  local id = string.sub(k, #ARGV[1] + 1)
  local held = false
  for i = 1, 4 do
    if redis.call('ZSCORE', KEYS[i], id) then held = true end
  end
  if not held then rows = rows + 1 end
end
return {orphans, rows}
`

// TestClusterReshard: a queue's slot is migrated to another primary (MigrateSlot: IMPORTING,
// MIGRATING, MIGRATE ... KEYS, SETSLOT NODE) while producers enqueue with Replicated acks
// (and schedule jobs to run after the move), two sets of workers drain it, and a zombie holds
// three claims whose leases run out after the move. Scripts the cluster refuses during the
// move (TRYAGAIN, ASK, MOVED) are sent again by the bus. Right after the move every key of
// the slot is on the new owner, and there every member of the queue's sets has its row and
// every row is in a set. Then reap (the zombie's jobs run again under token 2), promote (the
// scheduled jobs run) and the wake list (an idle worker takes a new job at once) work for
// the moved queue; 0 acknowledged jobs lost, 0 completed twice.
func TestClusterReshard(t *testing.T) {
	t.Parallel()
	cl := valkeytest.StartCluster(t)
	ctx := context.Background()
	prims := cl.Primaries()
	name := queueOn(t, cl, valkeytest.TestName(t), prims[0])
	q := keys.MustQueue(name)
	slot := queueSlot(name)
	led := newLedger()
	const wakeTimeout = 20 * time.Second
	inProcessWorkers(t, cl, []string{name}, 2, bus.WorkerConfig{
		Concurrency: 8, Lease: time.Second, HousekeepInterval: 300 * time.Millisecond, WakeTimeout: wakeTimeout,
	}, led)
	c := cl.Client(t)
	b := newBus(t, c, bus.Config{})
	replicated := bus.Ack{Durability: bus.Replicated, Timeout: time.Second}

	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() { produce(ctx, b, name, replicated, 100_000, 5*time.Millisecond, &stop, led) })
	var scheduled atomic.Int64
	wg.Go(func() {
		for !stop.Load() {
			out, err := b.Enqueue(ctx, name, mustTask(t, "work"), &bus.EnqueueOpts{Delay: 1500 * time.Millisecond, Ack: replicated})
			led.mu.Lock()
			if err == nil {
				led.acked[out.ID] = true
				scheduled.Add(1)
			} else {
				led.unacked++
			}
			led.mu.Unlock()
			time.Sleep(50 * time.Millisecond)
		}
	})
	ranCount := func() int {
		led.mu.Lock()
		defer led.mu.Unlock()
		return len(led.runs)
	}
	valkeytest.Eventually(t, 30*time.Second, "work before the move", func() bool { return ranCount() >= 300 })

	// The zombie: three claims nobody completes, with leases that end after the move.
	var zombie []bus.Job
	valkeytest.Eventually(t, 10*time.Second, "the zombie to hold 3 jobs", func() bool {
		js, err := b.Claim(ctx, name, &bus.ClaimOpts{Count: 3 - len(zombie), Lease: 1500 * time.Millisecond})
		require.NoError(t, err)
		zombie = append(zombie, js...)
		return len(zombie) == 3
	})

	// A backlog, so that the move has thousands of keys to carry while the load runs.
	for range 10 {
		jobs := make([]bus.NewJob, 500)
		for i := range jobs {
			jobs[i].Payload = mustTask(t, "work")
		}
		out, err := b.EnqueueBatch(ctx, name, jobs, &bus.EnqueueOpts{Ack: replicated})
		require.NoError(t, err)
		led.mu.Lock()
		for _, e := range out {
			led.acked[e.ID] = true
		}
		led.mu.Unlock()
	}
	start := time.Now()
	mctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	require.NoError(t, cl.MigrateSlot(mctx, slot, prims[1]))
	moved := time.Since(start)
	s := strconv.Itoa(int(slot))
	left, err := prims[0].Do(ctx, "CLUSTER", "COUNTKEYSINSLOT", s)
	require.NoError(t, err)
	require.Equal(t, "0", left, "no key of the queue's slot left on the old owner")
	counts, err := c.Do(ctx, c.B().Eval().Script(consistency).Numkeys(4).Key(q.Pending(), q.Active(), q.Schedule(), q.Dead()).Arg(q.JobPrefix()).Build()).AsIntSlice()
	require.NoError(t, err)
	n, err := prims[1].Do(ctx, "CLUSTER", "COUNTKEYSINSLOT", s)
	require.NoError(t, err)
	t.Logf("slot %d moved in %v; on the new owner %s keys, %d set members without a row, %d rows in no set; scripts refused by the cluster and sent again so far: %d by the producers' bus",
		slot, moved.Round(time.Millisecond), n, counts[0], counts[1], bus.Resent(b))
	require.Equal(t, []int64{0, 0}, counts, "rows and set memberships together on the new owner")

	before := ranCount()
	valkeytest.Eventually(t, 30*time.Second, "work after the move", func() bool { return ranCount() >= before+300 })
	valkeytest.Eventually(t, 30*time.Second, "the zombie's jobs to be reaped and run again", func() bool {
		led.mu.Lock()
		defer led.mu.Unlock()
		for _, j := range zombie {
			if led.runs[j.ID] == 0 {
				return false
			}
		}
		return true
	})
	for _, j := range zombie {
		require.ErrorIs(t, b.Complete(ctx, j, nil), bus.ErrStale, "the zombie is refused on the new owner")
	}
	stop.Store(true)
	wg.Wait()
	queuesDrained(t, b, []string{name}, time.Minute)

	time.Sleep(500 * time.Millisecond) // the workers are idle, blocked on the wake list
	idle := ranCount()
	woke := time.Now()
	out, err := b.Enqueue(ctx, name, mustTask(t, "work"), &bus.EnqueueOpts{Ack: replicated})
	require.NoError(t, err)
	led.mu.Lock()
	led.acked[out.ID] = true
	led.mu.Unlock()
	valkeytest.Eventually(t, wakeTimeout/2, "an idle worker to take the job", func() bool { return ranCount() > idle })
	t.Logf("after the move: the zombie's 3 jobs reaped and run again, %d scheduled jobs promoted and run, an idle worker woken %v after an enqueue (wake timeout %v)",
		scheduled.Load(), time.Since(woke).Round(time.Millisecond), wakeTimeout)
	queuesDrained(t, b, []string{name}, time.Minute)
	tl := report(t, "slot migration under load, Replicated enqueues", led, true, false)
	require.Empty(t, tl.twice, "completed twice")
	require.Zero(t, tl.unacked, "no enqueue failed: the ones the cluster refused during the move were sent again")
}
