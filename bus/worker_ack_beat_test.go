package bus_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
)

// TestClaimAckBackoffKeepsHeartbeats: a worker whose claims fall short of ClaimAck (its
// primary lost the replica) backs off between claims, doubling up to 2 s; the heartbeat of
// the job it already runs does not wait for that backoff. With a lease of 1.5 s, a heartbeat
// every 500 ms and the fleet's reaper running (Reap every 50 ms here), a heartbeat held back
// by the backoff (it was, until the loop sent heartbeats during one: gaps of 2.1 s) lost the
// lease of a job running on a primary that answered.
func TestClaimAckBackoffKeepsHeartbeats(t *testing.T) {
	t.Parallel()
	primary := valkeytest.Start(t)
	replica := valkeytest.Start(t, valkeytest.WithConfig("replicaof", "127.0.0.1 "+strconv.Itoa(primary.Port)))
	ctx := context.Background()
	c := primary.Client(t)
	valkeytest.Eventually(t, 10*time.Second, "the replica to be linked", func() bool {
		info, err := c.Do(ctx, c.B().Info().Section("replication").Build()).ToString()
		require.NoError(t, err)
		return strings.Contains(info, "connected_slaves:1") && strings.Contains(info, "state=online")
	})
	b := newBus(t, c, bus.Config{})
	queue := valkeytest.TestName(t)

	var lost atomic.Int64
	var lastBeat, maxGap atomic.Int64
	release := make(chan struct{})
	w, err := bus.NewWorker(b, bus.WorkerConfig{
		Queue: queue, Concurrency: 2, Lease: 1500 * time.Millisecond, HeartbeatInterval: 500 * time.Millisecond,
		ClaimAck: bus.Ack{Durability: bus.Replicated, Timeout: 100 * time.Millisecond},
		OnEvent: func(e bus.JobEvent) {
			if e.Type == bus.JobLeaseLost {
				lost.Add(1)
			}
			if e.Type == bus.JobExtended {
				now := time.Now()
				if last := lastBeat.Swap(now.UnixNano()); last != 0 {
					if gap := now.Sub(time.Unix(0, last)); gap > time.Duration(maxGap.Load()) {
						maxGap.Store(int64(gap))
					}
				}
			}
		},
	})
	require.NoError(t, err)
	var started atomic.Int64
	bus.MustHandle(w, "slow", func(ctx context.Context, _ *bus.Task[args]) error {
		started.Add(1)
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}, nil)
	require.NoError(t, w.Start())
	defer func() {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		require.NoError(t, w.Close(cctx))
	}()

	enqueueTasks(t, b, queue, "slow", 1, "")
	valkeytest.Eventually(t, 10*time.Second, "the first job to start", func() bool { return started.Load() == 1 })

	// The replica goes: every claim from now on falls short of ClaimAck and backs off.
	replica.Close()
	enqueueTasks(t, b, queue, "slow", 1, "")
	deadline := time.Now().Add(6 * time.Second) // past six backoffs: 50 ms doubling to 1.6 s
	for time.Now().Before(deadline) {
		_, err := b.Reap(ctx, queue, nil) // as another worker's housekeeping would
		require.NoError(t, err)
		require.Zero(t, lost.Load(), "the running job lost its lease while claims backed off")
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("longest gap between heartbeats: %v", time.Duration(maxGap.Load()))
	require.Equal(t, int64(1), started.Load(), "no handler starts on an unacknowledged claim")
	require.Greater(t, w.Stats().HandedBack, int64(3), "claims fell short of ClaimAck and were handed back")
	close(release)
	valkeytest.Eventually(t, 10*time.Second, "the first job to complete", func() bool { return w.Stats().Completed == 1 })
}
