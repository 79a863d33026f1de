package bus_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
)

// slowClaimClient holds back the reply of one pipeline that carries the named script, once
// armed: the script has run on the server when ran is closed, and its reply reaches the
// caller hold later.
type slowClaimClient struct {
	valkey.Client
	script *lua.Script
	armed  atomic.Bool
	ran    chan struct{}
	hold   time.Duration
}

func (c *slowClaimClient) carries(multi []valkey.Completed) bool {
	for _, cmd := range multi {
		cs := cmd.Commands()
		if len(cs) > 1 && (cs[0] == "EVALSHA" && cs[1] == c.script.SHA1 || cs[0] == "EVAL" && cs[1] == c.script.Source) {
			return true
		}
	}
	return false
}

func (c *slowClaimClient) DoMulti(ctx context.Context, multi ...valkey.Completed) []valkey.ValkeyResult {
	hit := c.carries(multi) && c.armed.CompareAndSwap(true, false)
	res := c.Client.DoMulti(ctx, multi...)
	if hit {
		close(c.ran)
		time.Sleep(c.hold)
	}
	return res
}

func (c *slowClaimClient) Do(ctx context.Context, cmd valkey.Completed) valkey.ValkeyResult {
	hit := c.carries([]valkey.Completed{cmd}) && c.armed.CompareAndSwap(true, false)
	res := c.Client.Do(ctx, cmd)
	if hit {
		close(c.ran)
		time.Sleep(c.hold)
	}
	return res
}

// TestWakeDuringClaimInFlight: an idle worker blocked on the wake list sends a claim while it
// blocks (its due timer fires for a scheduled job cancelled meanwhile; a lane timer does the
// same). The claim runs on the server and finds nothing; then a job is enqueued and its wake
// marker is popped by the worker's block while the claim's reply is still on its way. The
// reply must not end the hunger the marker brought: the worker claims again and runs the job
// at once, not after its wake timeout (30 s here).
func TestWakeDuringClaimInFlight(t *testing.T) {
	srv := valkeytest.Start(t)
	raw := srv.Client(t)
	slow := &slowClaimClient{Client: raw, script: lua.Get("claim"), ran: make(chan struct{}), hold: time.Second}
	b := newBus(t, slow, bus.Config{})
	plain := newBus(t, raw, bus.Config{})
	ctx := context.Background()
	name := valkeytest.TestName(t)
	q := keys.MustQueue(name)

	s, err := bus.EnqueueTask(ctx, plain, name, "work", args{N: -1}, &bus.TaskOpts{EnqueueOpts: bus.EnqueueOpts{Delay: 2 * time.Second}})
	require.NoError(t, err)
	ran := make(chan int, 4)
	startWorker(t, b, bus.WorkerConfig{Queue: name, Concurrency: 1, Prefetch: -1, WakeTimeout: 30 * time.Second, HousekeepInterval: -1, StatsInterval: -1},
		func(w *bus.Worker) {
			bus.MustHandle(w, "work", func(ctx context.Context, task *bus.Task[args]) error {
				ran <- task.Args.N
				return nil
			}, nil)
		})
	// Idle: the schedule's head read (the due timer armed for s), the "s" marker popped,
	// blocked on the wake list.
	valkeytest.Eventually(t, 10*time.Second, "the worker to block on the wake list", func() bool {
		list, err := srv.Do(ctx, "CLIENT", "LIST", "TYPE", "normal")
		require.NoError(t, err)
		n, err := raw.Do(ctx, raw.B().Llen().Key(q.Wake()).Build()).AsInt64()
		require.NoError(t, err)
		return strings.Contains(list, "cmd=blpop") && n == 0
	})
	time.Sleep(200 * time.Millisecond)
	// The scheduled job goes away; the due timer stays armed for its run-at.
	_, err = plain.Cancel(ctx, name, s.ID)
	require.NoError(t, err)
	slow.armed.Store(true)
	select {
	case <-slow.ran: // the due timer's claim ran on the server and found nothing
	case <-time.After(10 * time.Second):
		t.Fatal("the due timer's claim was not sent")
	}
	enqueuedAt := time.Now()
	_, err = bus.EnqueueTask(ctx, plain, name, "work", args{N: 1}, nil)
	require.NoError(t, err)
	select {
	case n := <-ran:
		require.Equal(t, 1, n)
		t.Logf("ran %v after its enqueue", time.Since(enqueuedAt))
	case <-time.After(5 * time.Second):
		t.Fatalf("a job enqueued while the worker idled did not run within 5 s: its wake marker was consumed while a claim was in flight, and the claim's reply cleared hungry (wake list length now: %d)",
			func() int64 { n, _ := raw.Do(ctx, raw.B().Llen().Key(q.Wake()).Build()).AsInt64(); return n }())
	}
}

// blpops counts the clients of srv blocked in BLPOP.
func blpops(t *testing.T, srv *valkeytest.Server) int {
	t.Helper()
	list, err := srv.Do(context.Background(), "CLIENT", "LIST", "TYPE", "normal")
	require.NoError(t, err)
	return strings.Count(list, "cmd=blpop")
}

// TestFullWorkerGivesWakeBack: a worker whose block was outstanding when a timer's claim
// filled its only slot keeps that block; Valkey serves blocked clients in the order they
// blocked, so the next enqueue's marker goes to it. It has no room, so it gives the marker
// back to the wake list, and an idle worker of the queue runs the job at once instead of
// after the busy one's handler or its own wake timeout.
func TestFullWorkerGivesWakeBack(t *testing.T) {
	srv := valkeytest.Start(t)
	c := srv.Client(t)
	b := newBus(t, c, bus.Config{})
	ctx := context.Background()
	name := valkeytest.TestName(t)
	q := keys.MustQueue(name)
	release := make(chan struct{})
	defer close(release) // before the workers' Close, a cleanup
	ran := make(chan string, 4)
	register := func(id string) func(w *bus.Worker) {
		return func(w *bus.Worker) {
			bus.MustHandle(w, "slow", func(ctx context.Context, task *bus.Task[args]) error {
				ran <- id + ":slow"
				select {
				case <-release:
				case <-ctx.Done():
				case <-time.After(20 * time.Second):
				}
				return nil
			}, nil)
			bus.MustHandle(w, "work", func(ctx context.Context, task *bus.Task[args]) error {
				ran <- id + ":work"
				return nil
			}, nil)
		}
	}
	cfg := bus.WorkerConfig{Queue: name, Concurrency: 1, Prefetch: -1, WakeTimeout: 30 * time.Second, HousekeepInterval: -1, StatsInterval: -1}
	_, err := bus.EnqueueTask(ctx, b, name, "slow", args{}, &bus.TaskOpts{EnqueueOpts: bus.EnqueueOpts{Delay: 1500 * time.Millisecond}})
	require.NoError(t, err)
	cfg.ID = "w1"
	startWorker(t, b, cfg, register("w1"))
	// w1 idles, blocked, its due timer armed for the scheduled job; at its run-at the timer
	// makes w1 claim it, and the handler holds w1's only slot.
	select {
	case got := <-ran:
		require.Equal(t, "w1:slow", got)
	case <-time.After(10 * time.Second):
		t.Fatal("the scheduled job did not run")
	}
	require.Equal(t, 1, blpops(t, srv), "w1, full, still blocks on the wake list")
	cfg.ID = "w2"
	startWorker(t, b, cfg, register("w2"))
	valkeytest.Eventually(t, 10*time.Second, "w2 to block on the wake list", func() bool {
		n, err := c.Do(ctx, c.B().Llen().Key(q.Wake()).Build()).AsInt64()
		require.NoError(t, err)
		return blpops(t, srv) == 2 && n == 0
	})
	time.Sleep(200 * time.Millisecond)
	enqueuedAt := time.Now()
	_, err = bus.EnqueueTask(ctx, b, name, "work", args{}, nil)
	require.NoError(t, err)
	select {
	case got := <-ran:
		t.Logf("%s ran %v after its enqueue", got, time.Since(enqueuedAt))
	case <-time.After(4 * time.Second):
		t.Fatal("a job enqueued while w2 idled did not run within 4 s: its wake marker went to w1, whose only slot is busy")
	}
}
