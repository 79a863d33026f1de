package bus_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
)

// TestWorkerRoundTripBoundByLease: a round trip sent to a server that stopped answering
// (SIGSTOP: the connection stays open, nothing comes back) gives up after half the worker's
// lease, not after the 10 s bound of long leases. Replies are applied in send order, so a
// round trip that hangs holds back the next one, to the slot's new primary after a failover,
// and the jobs it claimed, whose leases run meanwhile.
func TestWorkerRoundTripBoundByLease(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Start(t)
	b := newBus(t, srv.Client(t), bus.Config{})
	name := valkeytest.TestName(t)
	rec := &recordingHandler{}
	ran := make(chan struct{}, 1)
	startWorker(t, b, bus.WorkerConfig{
		Queue: name, Lease: 2 * time.Second, HousekeepInterval: 100 * time.Millisecond,
		WakeTimeout: time.Minute, Logger: slog.New(rec),
	}, func(w *bus.Worker) {
		bus.MustHandle(w, "k", func(context.Context, *bus.Task[args]) error { ran <- struct{}{}; return nil }, nil)
	})
	enqueueTasks(t, b, name, "k", 1, "")
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("the job did not run")
	}
	time.Sleep(300 * time.Millisecond) // its complete is answered; the worker housekeeps, idle

	require.NoError(t, srv.Stop())
	paused := time.Now()
	t.Cleanup(func() { _ = srv.Continue() })
	// The next housekeeping round trip (100 ms on, jittered) is sent to the paused server and
	// fails after 1 s, half the lease; the blocker's BLPOP (a minute) logs nothing meanwhile.
	for rec.count("bus: worker:") == 0 {
		if time.Since(paused) > 8*time.Second {
			t.Fatal("no round trip to the paused server failed within 8 s: it is bounded by the 10 s of long leases, not by half the lease")
		}
		time.Sleep(10 * time.Millisecond)
	}
	took := time.Since(paused)
	t.Logf("the first round trip to the paused server failed %v after the pause", took.Round(time.Millisecond))
	require.Less(t, took, 3*time.Second, "bounded by half the lease")
}
