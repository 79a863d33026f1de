package bus_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// TestCancelRunningFromAnotherProcess: a worker process runs a handler that waits on its
// context; this process cancels the job with Bus.Cancel. The handler's context ends with the
// cause ErrCancelled within one heartbeat of the cancel, the job goes to dead with the failure
// "cancelled", and it is not retried: attempts stays 1 and the worker never claims it again.
func TestCancelRunningFromAnotherProcess(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Shared(t)
	c := srv.Client(t)
	b := newBus(t, c, bus.Config{})
	ctx := context.Background()
	name := valkeytest.TestName(t)
	const (
		lease = 3 * time.Second
		beat  = 200 * time.Millisecond
	)
	p := startProc(t, srv.Addr, name, "w", lease, 0, 1, true, envBeat+"="+beat.String(), envStarted+"=1")
	enq, err := bus.EnqueueTask(ctx, b, name, "block", args{}, nil)
	require.NoError(t, err)
	id := enq.ID.String()
	valkeytest.Eventually(t, time.Minute, "the handler to start", func() bool {
		n, err := c.Do(ctx, c.B().Hexists().Key(name+".started").Field(id).Build()).AsBool()
		require.NoError(t, err)
		return n
	})

	cancelled := time.Now()
	state, err := b.Cancel(ctx, name, enq.ID)
	require.NoError(t, err)
	require.Equal(t, bus.StateActive, state, "a running job is cancelled in place")

	var cause string
	valkeytest.Eventually(t, 30*time.Second, "the handler's context to end", func() bool {
		v, err := c.Do(ctx, c.B().Hget().Key(name+".cause").Field(id).Build()).ToString()
		if err != nil {
			return false
		}
		cause = v
		return true
	})
	f := strings.Fields(cause)
	require.Equal(t, "true", f[0], "the cause is ErrCancelled")
	us, err := strconv.ParseInt(f[1], 10, 64)
	require.NoError(t, err)
	took := time.UnixMicro(us).Sub(cancelled)
	t.Logf("the handler in the worker process saw ErrCancelled %v after the cancel (heartbeat every %v)", took.Round(time.Millisecond), beat)
	require.Less(t, took, beat+150*time.Millisecond, "within one heartbeat (and a round trip)")

	valkeytest.Eventually(t, 30*time.Second, "the job to be dead", func() bool {
		info, err := b.Lookup(ctx, name, enq.ID)
		require.NoError(t, err)
		return info.State == bus.StateDead
	})
	// Not retried: wait past a backoff and a housekeeping round, then look again.
	time.Sleep(2 * time.Second)
	info, err := b.Lookup(ctx, name, enq.ID)
	require.NoError(t, err)
	require.Equal(t, bus.StateDead, info.State)
	require.Equal(t, int64(1), info.Attempts, "claimed once: not retried")
	require.Len(t, info.Failures, 1)
	require.Equal(t, int64(1), info.Failures[0].Attempt)
	require.Equal(t, "cancelled", info.Failures[0].Error)
	require.Len(t, row(t, c, keys.MustQueue(name), enq.ID), 3, "the row stays three fields")
	p.stop(t)
	var events []string
	for _, e := range procLog(t, c, name, "w") {
		if !strings.HasPrefix(e, "extended ") { // the heartbeats before the cancel
			events = append(events, e)
		}
	}
	require.Equal(t, []string{"cancelled " + id + " 1", "dead " + id + " 1"}, events, "the worker's events: cancelled, then dead, nothing else")
	require.NoError(t, c.Do(ctx, c.B().Del().Key(name+".started", name+".cause", name+".log.w").Build()).Error())
}

// TestWorkerCancelOutcomes: what a cancelled handler returns decides little: an error or a
// snooze sends the job to dead without a retry (its failure "cancelled"); nil retires it,
// since the work was done. Stats count each cancel.
func TestWorkerCancelOutcomes(t *testing.T) {
	t.Parallel()
	ctx, c, b, name, q := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	started := make(chan string, 3)
	w := startWorker(t, b, bus.WorkerConfig{Queue: name, Lease: time.Second, HeartbeatInterval: 50 * time.Millisecond, MaxAttempts: 5}, func(w *bus.Worker) {
		bus.MustHandle(w, "stop", func(ctx context.Context, task *bus.Task[args]) error {
			started <- task.Job.ID.String()
			<-ctx.Done()
			switch task.Args.Mode {
			case "nil":
				return nil
			case "snooze":
				return bus.Snooze(time.Millisecond)
			}
			return context.Cause(ctx)
		}, nil)
	})
	ids := map[string]string{}
	for _, mode := range []string{"err", "nil", "snooze"} {
		e, err := bus.EnqueueTask(ctx, b, name, "stop", args{Mode: mode}, nil)
		require.NoError(t, err)
		ids[mode] = e.ID.String()
	}
	for range 3 {
		select {
		case id := <-started:
			jid, err := keys.ParseJobID(id)
			require.NoError(t, err)
			_, err = b.Cancel(ctx, name, jid)
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Fatal("a handler did not start")
		}
	}
	valkeytest.Eventually(t, 30*time.Second, "the outcomes", func() bool { s := w.Stats(); return s.Dead == 2 && s.Completed == 1 })
	s := w.Stats()
	require.Equal(t, int64(3), s.Cancelled)
	require.Equal(t, int64(3), s.Claimed, "nothing was retried")
	require.Zero(t, s.Retried)
	require.Zero(t, s.Snoozed)
	for _, mode := range []string{"err", "snooze"} {
		jid, _ := keys.ParseJobID(ids[mode])
		info, err := b.Lookup(ctx, name, jid)
		require.NoError(t, err)
		require.Equal(t, bus.StateDead, info.State, mode)
		require.Equal(t, []bus.Failure{{Attempt: 1, At: info.Failures[0].At, Error: "cancelled"}}, info.Failures, mode)
	}
	jid, _ := keys.ParseJobID(ids["nil"])
	require.Empty(t, row(t, c, q, jid), "returned nil: retired")
}
