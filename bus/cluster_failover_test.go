package bus_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
)

// TestClusterFailover: three queues on three primaries, producers enqueueing with Replicated
// acks and two sets of workers (two clients, as two processes would have) draining them,
// while each primary in turn is failed over gracefully (CLUSTER FAILOVER on its replica).
// The clients recover by themselves: 0 acknowledged jobs lost, 0 completed twice, every job
// that ran twice explained by a lease expiry. Afterwards every worker, idle and blocked on
// its wake list, is woken by one enqueue well before its wake timeout: the blocking
// connection followed the new primary.
func TestClusterFailover(t *testing.T) {
	t.Parallel()
	cl := valkeytest.StartCluster(t)
	ctx := context.Background()
	queues := threeQueues(t, cl, valkeytest.TestName(t))
	led := newLedger()
	const wakeTimeout = 20 * time.Second
	inProcessWorkers(t, cl, queues, 2, bus.WorkerConfig{
		Concurrency: 8, Lease: 2 * time.Second, HousekeepInterval: 300 * time.Millisecond, WakeTimeout: wakeTimeout,
	}, led)
	b := newBus(t, cl.Client(t), bus.Config{})
	replicated := bus.Ack{Durability: bus.Replicated, Timeout: time.Second}

	var stop atomic.Bool
	var wg sync.WaitGroup
	for _, q := range queues {
		wg.Go(func() { produce(ctx, b, q, replicated, 5000, 20*time.Millisecond, &stop, led) })
	}
	ranCount := func() int {
		led.mu.Lock()
		defer led.mu.Unlock()
		return len(led.runs)
	}
	valkeytest.Eventually(t, 30*time.Second, "work before the first failover", func() bool { return ranCount() >= 300 })
	for i, q := range queues {
		start := time.Now()
		fctx, cancel := context.WithTimeout(ctx, time.Minute)
		require.NoError(t, cl.Failover(fctx, queueSlot(q)), "failover %d", i)
		cancel()
		before := ranCount()
		valkeytest.Eventually(t, 30*time.Second, fmt.Sprintf("work after failover %d", i), func() bool { return ranCount() >= before+300 })
		t.Logf("failover of %s's primary done and 300 more jobs ran, %v after it began", q, time.Since(start).Round(time.Millisecond))
	}
	stop.Store(true)
	wg.Wait()
	queuesDrained(t, b, queues, time.Minute)

	// Idle workers block on the wake lists of the new primaries.
	time.Sleep(500 * time.Millisecond)
	for _, q := range queues {
		before := ranCount()
		start := time.Now()
		out, err := b.Enqueue(ctx, q, mustTask(t, "work"), &bus.EnqueueOpts{Ack: replicated})
		require.NoError(t, err)
		led.mu.Lock()
		led.acked[out.ID] = true
		led.mu.Unlock()
		valkeytest.Eventually(t, wakeTimeout/2, "an idle worker to take the job", func() bool { return ranCount() > before })
		t.Logf("%s: an idle worker ran a new job %v after its enqueue (wake timeout %v)", q, time.Since(start).Round(time.Millisecond), wakeTimeout)
	}
	queuesDrained(t, b, queues, time.Minute)
	tl := report(t, "graceful failover of each primary, Replicated enqueues", led, true, false)
	require.Empty(t, tl.twice, "completed twice")
}

func mustTask(t *testing.T, kind string) []byte {
	t.Helper()
	p, err := bus.EncodeTask(kind, args{}, nil)
	require.NoError(t, err)
	return p
}

// TestClusterFailoverPausedPrimary: idle workers block on their wake lists on the queues'
// primary; the primary is paused (SIGSTOP: its connections stay open and answer nothing) and
// its replica takes over (CLUSTER FAILOVER FORCE). A job enqueued on the new primary must run
// while the old primary is still paused: the blocking wait gives up a connection that does
// not answer within its wake timeout plus a second, a round trip sent to the paused primary
// before the client learned of the failover gives up after half the lease (1 s here), and
// the loop's next round trip goes to the new primary once the client has refreshed its slot
// map. A client with
// ClusterOption.ShardsRefreshInterval learns it within that interval; a default client only
// when its connection to the paused node times out (ConnWriteTimeout, 10 s by default).
// Both are measured; the first is bounded.
func TestClusterFailoverPausedPrimary(t *testing.T) {
	t.Parallel()
	cl := valkeytest.StartCluster(t)
	ctx := context.Background()
	base := valkeytest.TestName(t)
	primary := cl.Primaries()[0]
	refreshing := queueOn(t, cl, base+".refresh", primary)
	plain := queueOn(t, cl, base+".default", primary)
	slot := queueSlot(refreshing)
	const wakeTimeout = 2 * time.Second
	var ran [2]atomic.Int64
	for i, q := range []string{refreshing, plain} {
		c := cl.Client(t)
		if i == 0 {
			c = cl.ClientWith(t, func(o *valkey.ClientOption) { o.ClusterOption.ShardsRefreshInterval = 500 * time.Millisecond })
		}
		w, err := bus.NewWorker(newBus(t, c, bus.Config{}), bus.WorkerConfig{Queue: q, Concurrency: 2, Lease: 2 * time.Second, WakeTimeout: wakeTimeout})
		require.NoError(t, err)
		bus.MustHandle(w, "work", func(context.Context, *bus.Task[args]) error { ran[i].Add(1); return nil }, nil)
		require.NoError(t, w.Start())
		t.Cleanup(func() {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			_ = w.Close(cctx)
		})
	}
	b := newBus(t, cl.ClientWith(t, func(o *valkey.ClientOption) { o.ClusterOption.ShardsRefreshInterval = 500 * time.Millisecond }), bus.Config{})
	for _, q := range []string{refreshing, plain} {
		_, err := b.Enqueue(ctx, q, mustTask(t, "work"), nil)
		require.NoError(t, err)
	}
	valkeytest.Eventually(t, 10*time.Second, "the first jobs to run", func() bool { return ran[0].Load() == 1 && ran[1].Load() == 1 })
	time.Sleep(300 * time.Millisecond) // the workers are idle, blocked on their wake lists

	require.NoError(t, primary.Stop())
	t.Cleanup(func() { _ = primary.Continue() })
	fctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	require.NoError(t, cl.Failover(fctx, slot))
	for _, q := range []string{refreshing, plain} {
		retrying(t, "an enqueue on the new primary", func() error {
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			_, err := b.Enqueue(cctx, q, mustTask(t, "work"), nil)
			return err
		})
	}
	enqueued := time.Now()
	valkeytest.Eventually(t, 3*wakeTimeout, "the job of the refreshing client's worker to run", func() bool { return ran[0].Load() == 2 })
	first := time.Since(enqueued)
	valkeytest.Eventually(t, time.Minute, "the job of the default client's worker to run", func() bool { return ran[1].Load() == 2 })
	t.Logf("old primary paused, slot failed over: a job enqueued on the new primary ran %v later with ShardsRefreshInterval 500ms, %v later with a default client (wake timeout %v)",
		first.Round(time.Millisecond), time.Since(enqueued).Round(time.Millisecond), wakeTimeout)
}

// forcedFailover fails the primary of slot over to its replica while the replica lags: the
// replica is cut off for lag, the primary is killed, the replica is promoted with CLUSTER
// FAILOVER FORCE, and the old primary is restarted, so it rejoins as the new primary's
// replica (and the next acknowledged write has a replica to wait for).
func forcedFailover(t *testing.T, ctx context.Context, cl *valkeytest.Cluster, slot uint16, lag time.Duration) {
	t.Helper()
	p := cl.PrimaryForSlot(slot)
	require.NotNil(t, p)
	var rs []*valkeytest.Server // after an earlier failover, the topology may not list it yet
	valkeytest.Eventually(t, time.Minute, "the primary's replica in the topology", func() bool {
		rs = cl.ReplicasOf(p)
		return len(rs) == 1
	})
	cutReplica(t, ctx, p, rs[0])
	time.Sleep(lag)
	promoteLagging(t, ctx, cl, slot, p, rs[0])
	require.NoError(t, p.Restart())
	valkeytest.Eventually(t, time.Minute, "the old primary to rejoin as a replica", func() bool {
		r := cl.ReplicasOf(rs[0])
		return len(r) == 1 && r[0] == p
	})
}

// TestClusterForcedFailover: two queues on one primary, one fed by producers with plain
// (Primary) acknowledgements and one with Replicated; workers claim with ClaimAck Replicated.
// The replica is cut off for 700 ms under load, the primary killed and the replica promoted.
// With Replicated, 0 acknowledged jobs are lost; with Primary, the jobs acknowledged during
// the lag are lost and counted. No token is completed twice; a job whose complete was lost
// with the primary runs again under a newer token, and each is listed with its cause.
func TestClusterForcedFailover(t *testing.T) {
	t.Parallel()
	cl := valkeytest.StartCluster(t)
	ctx := context.Background()
	base := valkeytest.TestName(t)
	p := cl.Primaries()[0]
	plainQ, replQ := queueOn(t, cl, base+".plain", p), queueOn(t, cl, base+".repl", p)
	require.Equal(t, cl.PrimaryForSlot(queueSlot(plainQ)), cl.PrimaryForSlot(queueSlot(replQ)))
	cfg := bus.WorkerConfig{
		Concurrency: 8, Lease: time.Second, HousekeepInterval: 300 * time.Millisecond,
		ClaimAck: bus.Ack{Durability: bus.Replicated, Timeout: 300 * time.Millisecond},
	}
	plainLed, replLed := newLedger(), newLedger()
	inProcessWorkers(t, cl, []string{plainQ}, 2, cfg, plainLed)
	inProcessWorkers(t, cl, []string{replQ}, 2, cfg, replLed)
	b := newBus(t, cl.Client(t), bus.Config{})
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() { produce(ctx, b, plainQ, bus.Ack{}, 20000, 10*time.Millisecond, &stop, plainLed) })
	wg.Go(func() {
		produce(ctx, b, replQ, bus.Ack{Durability: bus.Replicated, Timeout: 300 * time.Millisecond}, 20000, 10*time.Millisecond, &stop, replLed)
	})
	ranCount := func() int {
		plainLed.mu.Lock()
		defer plainLed.mu.Unlock()
		return len(plainLed.runs)
	}
	valkeytest.Eventually(t, 30*time.Second, "work before the failover", func() bool { return ranCount() >= 300 })
	start := time.Now()
	forcedFailover(t, ctx, cl, queueSlot(plainQ), 700*time.Millisecond)
	t.Logf("forced failover with 700ms of lag, and the old primary back as a replica: %v", time.Since(start).Round(time.Millisecond))
	before := ranCount()
	valkeytest.Eventually(t, 30*time.Second, "work after the failover", func() bool { return ranCount() >= before+300 })
	stop.Store(true)
	wg.Wait()
	queuesDrained(t, b, []string{plainQ, replQ}, time.Minute)
	plain := report(t, "forced failover, 700ms lag, Primary enqueues", plainLed, false, true)
	report(t, "forced failover, 700ms lag, Replicated enqueues", replLed, true, true)
	require.NotEmpty(t, plain.lost, "the plain acknowledgements of the lag are lost: the hazard is real")
}
