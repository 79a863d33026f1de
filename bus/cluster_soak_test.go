package bus_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
)

// clusterSoakJobs is the size of TestClusterSoak: 1,500 jobs per queue in `make test`; with
// EMQ_SOAK=1 (make soak), 20,000.
func clusterSoakJobs() int {
	if soak() {
		return 20_000
	}
	return 1_500
}

// TestClusterSoak: three queues on three primaries, producers enqueueing with Replicated
// acks, three worker processes (ClaimAck Replicated) draining all three queues. Each
// primary in turn is failed over gracefully, then forced over with its replica cut off for
// 500 ms (the old primary killed, then restarted as a replica), then the queue's slot is
// migrated to another primary. Counts: acknowledged, completed, completed twice (by id and
// token), lost: 0 lost, never two accepted completes under one token, every job that ran
// twice explained (a lease expiry, a refused outcome, or a complete lost with the primary
// that died unreplicated).
func TestClusterSoak(t *testing.T) {
	t.Parallel()
	cl := valkeytest.StartCluster(t)
	ctx := context.Background()
	queues := threeQueues(t, cl, valkeytest.TestName(t))
	n := clusterSoakJobs()
	led := newLedger()
	procs := make([]*clusterProc, 3)
	for i := range procs {
		procs[i] = startClusterProc(t, cl, queues, fmt.Sprintf("w%d", i), true)
	}
	for _, p := range procs {
		valkeytest.Eventually(t, time.Minute, "a worker process to start", func() bool {
			data, _ := os.ReadFile(p.out)
			return strings.Contains(string(data), "ready")
		})
	}
	b := newBus(t, cl.Client(t), bus.Config{})
	replicated := bus.Ack{Durability: bus.Replicated, Timeout: 500 * time.Millisecond}
	var stop atomic.Bool
	var wg sync.WaitGroup
	// Paced so that the production spans the faults: batches of 10, 15 s of pauses in all.
	pace := 150 * time.Second / time.Duration(n)
	for _, q := range queues {
		wg.Go(func() { produce(ctx, b, q, replicated, n, pace, &stop, led) })
	}
	start := time.Now()
	settle := func() { time.Sleep(time.Second) }
	settle()
	for _, q := range queues {
		slot := queueSlot(q)
		fctx, cancel := context.WithTimeout(ctx, time.Minute)
		require.NoError(t, cl.Failover(fctx, slot), "graceful failover of %s's primary", q)
		cancel()
		settle()
		forcedFailover(t, ctx, cl, slot, 500*time.Millisecond)
		settle()
		owner := cl.PrimaryForSlot(slot)
		var to *valkeytest.Server
		for _, p := range cl.Primaries() {
			if p != owner {
				to = p
				break
			}
		}
		require.NotNil(t, to)
		mctx, cancel := context.WithTimeout(ctx, time.Minute)
		require.NoError(t, cl.MigrateSlot(mctx, slot, to), "migrating %s's slot", q)
		cancel()
		settle()
		t.Logf("%s: graceful failover, forced failover with 500ms of lag, slot migrated: done %v into the run", q, time.Since(start).Round(time.Millisecond))
	}
	wg.Wait()
	queuesDrained(t, b, queues, 5*time.Minute)
	t.Logf("%d queues x %d jobs produced and drained in %v", len(queues), n, time.Since(start).Round(time.Millisecond))
	stopping := time.Now()
	for _, p := range procs {
		p.stop(t)
		p.readInto(t, led)
	}
	t.Logf("worker processes closed in %v", time.Since(stopping).Round(time.Millisecond))
	report(t, fmt.Sprintf("cluster soak (%d jobs per queue, 3 worker processes)", n), led, true, true)
}
