package bus_test

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// TestWorkerPickupLatency: idle workers blocked on the wake list start a handler soon after
// an enqueue. Reports p50 and p99 of enqueue-to-handler-start over 1,000 jobs, enqueued one
// at a time.
func TestWorkerPickupLatency(t *testing.T) {
	t.Parallel()
	ctx, _, b, name, _ := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	started := make(chan time.Time, 1)
	for range 2 {
		startWorker(t, b, bus.WorkerConfig{Queue: name, Concurrency: 4}, func(w *bus.Worker) {
			bus.MustHandle(w, "ping", func(ctx context.Context, task *bus.Task[args]) error {
				started <- time.Now()
				return nil
			}, nil)
		})
	}
	payload, err := bus.EncodeTask("ping", args{}, nil)
	require.NoError(t, err)
	const n = 1000
	lat := make([]time.Duration, 0, n)
	for range n {
		t0 := time.Now()
		_, err := b.Enqueue(ctx, name, payload, nil)
		require.NoError(t, err)
		select {
		case at := <-started:
			lat = append(lat, at.Sub(t0))
		case <-time.After(30 * time.Second):
			t.Fatal("no handler started within 30 s of an enqueue")
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p50, p99 := lat[n/2], lat[n*99/100]
	t.Logf("pickup latency over %d jobs: p50 %v, p99 %v, max %v", n, p50, p99, lat[n-1])
	// Polling at the wake timeout (5 s) would put p50 in seconds.
	require.Less(t, p50, time.Second)
}

// TestWorkerIdleCommands: an idle worker sends no more than a few commands per second,
// counted by the server (INFO commandstats) on a server of the test's own, a wake on an "s"
// marker included: a job enqueued before the schedule's head wakes the worker once to read the
// head again, and it goes back to blocking.
func TestWorkerIdleCommands(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Start(t)
	c := srv.Client(t)
	b := newBus(t, c, bus.Config{})
	name := valkeytest.TestName(t)
	w := startWorker(t, b, bus.WorkerConfig{Queue: name}, func(w *bus.Worker) {
		bus.MustHandle(w, "never", func(ctx context.Context, task *bus.Task[args]) error { return nil }, nil)
	})
	// A job scheduled far ahead: the worker reads its run-at and must not wake for it.
	_, err := bus.EnqueueTask(context.Background(), b, name, "never", args{}, &bus.TaskOpts{EnqueueOpts: bus.EnqueueOpts{Delay: time.Hour}})
	require.NoError(t, err)
	// commandstats counts the commands scripts call too; what a client sent is EVALSHA,
	// EVAL, BLPOP and valkey-go's keep-alive PING on idle connections (the client's, not the
	// worker's doing, reported apart).
	calls := func() map[string]int64 {
		info, err := srv.Do(context.Background(), "INFO", "commandstats")
		require.NoError(t, err)
		by := map[string]int64{}
		for _, line := range strings.Split(info, "\n") {
			name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
			if !ok || !strings.HasPrefix(name, "cmdstat_") {
				continue
			}
			v, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
			n, _ := strconv.ParseInt(v, 10, 64)
			by[strings.TrimPrefix(name, "cmdstat_")] = n
		}
		return by
	}
	valkeytest.Eventually(t, 10*time.Second, "the first claim", func() bool { by := calls(); return by["evalsha"]+by["eval"] > 0 })
	// The start has settled (the first claim, schedule read and housekeeping answered) when
	// the worker blocks on the wake list.
	valkeytest.Eventually(t, 10*time.Second, "the worker to block on the wake list", func() bool {
		list, err := srv.Do(context.Background(), "CLIENT", "LIST", "TYPE", "normal")
		require.NoError(t, err)
		return strings.Contains(list, "cmd=blpop")
	})
	const window = 6 * time.Second
	before := calls()
	// Earlier than the head, later than the window: the "s" marker wakes the worker, which
	// reads the new head and blocks again; the enqueue is the test's one command in the window.
	_, err = bus.EnqueueTask(context.Background(), b, name, "never", args{}, &bus.TaskOpts{EnqueueOpts: bus.EnqueueOpts{Delay: 30 * time.Minute}})
	require.NoError(t, err)
	time.Sleep(window) // the quantity measured is what happens over time while idle
	after := calls()
	wakeLen, err := c.Do(context.Background(), c.B().Llen().Key(keys.MustQueue(name).Wake()).Build()).AsInt64()
	require.NoError(t, err)
	require.Zero(t, wakeLen, "the worker popped the s marker")
	diff := map[string]int64{}
	for k, v := range after {
		if d := v - before[k]; d > 0 && k != "info" {
			diff[k] = d
		}
	}
	sent := diff["evalsha"] + diff["eval"] + diff["blpop"] - 1 // the test's enqueue
	rate := float64(sent) / window.Seconds()
	t.Logf("idle worker: %.2f commands/s sent by the worker (EVALSHA, EVAL, BLPOP) over %v, plus %.2f/s keep-alive PING by valkey-go; all counted by the server, scripts' inner calls included: %v",
		rate, window, float64(diff["ping"])/window.Seconds(), diff)
	require.LessOrEqual(t, rate, 3.0)
	require.Zero(t, w.Stats().Claimed)
}

// TestWorkerScheduledWake: an idle worker wakes at a scheduled job's run-at (read from the
// schedule's head), well before its wake timeout, without any marker.
func TestWorkerScheduledWake(t *testing.T) {
	t.Parallel()
	ctx, c, b, name, _ := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	// Scheduled before the worker starts: its first claim finds nothing, reads the
	// schedule's head and arms its timer for the run-at; no marker will come (a scheduled
	// job pushes none) and housekeeping is off, so only the timer can wake it in time.
	delay := 700 * time.Millisecond
	_, err := bus.EnqueueTask(ctx, b, name, "later", args{}, &bus.TaskOpts{EnqueueOpts: bus.EnqueueOpts{Delay: delay}})
	require.NoError(t, err)
	enqueuedAt := serverMillis(t, c)
	ran := make(chan int64, 1)
	startWorker(t, b, bus.WorkerConfig{Queue: name, WakeTimeout: time.Minute, HousekeepInterval: -1}, func(w *bus.Worker) {
		bus.MustHandle(w, "later", func(ctx context.Context, task *bus.Task[args]) error {
			ran <- serverMillis(t, c)
			return nil
		}, nil)
	})
	select {
	case at := <-ran:
		late := time.Duration(at-enqueuedAt)*time.Millisecond - delay
		t.Logf("ran %v after its run-at", late)
		require.Less(t, late, 10*time.Second, "woke by the schedule, not by the 1 min wake timeout")
	case <-time.After(30 * time.Second):
		t.Fatal("the scheduled job did not run")
	}
}
