package bus_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// TestWorkerHandlerPanic: a handler's panic is the job's error, a *PanicError naming the
// kind, and fails the job like a returned error, even when the panic value is a SkipRetry or
// a Snooze error.
func TestWorkerHandlerPanic(t *testing.T) {
	t.Parallel()
	ctx, _, b, name, _ := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	events := make(chan bus.JobEvent, 100)
	w := startWorker(t, b, bus.WorkerConfig{
		Queue: name, MaxAttempts: 3, Backoff: func(int64) time.Duration { return time.Millisecond },
		OnEvent: func(e bus.JobEvent) { events <- e },
	}, func(w *bus.Worker) {
		bus.MustHandle(w, "panics", func(ctx context.Context, task *bus.Task[args]) error {
			if task.Job.Token == 1 {
				switch task.Args.Mode {
				case "skip":
					panic(bus.SkipRetry(errors.New("poison")))
				case "snooze":
					panic(bus.Snooze(time.Hour))
				}
				panic("boom")
			}
			return nil
		}, nil)
	})
	for _, mode := range []string{"boom", "skip", "snooze"} {
		_, err := bus.EnqueueTask(ctx, b, name, "panics", args{Mode: mode}, nil)
		require.NoError(t, err)
	}
	var retried []bus.JobEvent
	for completed := 0; completed < 3; {
		select {
		case e := <-events:
			switch e.Type {
			case bus.JobRetried:
				retried = append(retried, e)
			case bus.JobCompleted:
				completed++
			case bus.JobDead, bus.JobSnoozed:
				t.Fatalf("a panic must fail the job: %v %v", e.Type, e.Err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the jobs did not complete")
		}
	}
	require.Len(t, retried, 3)
	var values []string
	for _, e := range retried {
		var pe *bus.PanicError
		require.ErrorAs(t, e.Err, &pe)
		require.Equal(t, "bus: handler of kind panics", pe.Where)
		require.True(t, strings.HasPrefix(e.Err.Error(), "bus: handler of kind panics panicked: "), e.Err.Error())
		require.Contains(t, string(pe.Stack), "worker_outcomes_test.go", "the stack is the handler's")
		values = append(values, fmt.Sprint(pe.Value))
	}
	require.Contains(t, values, "boom")
	s := w.Stats()
	require.Equal(t, int64(3), s.Retried)
	require.Zero(t, s.Dead)
	require.Zero(t, s.Snoozed)
}

// TestWorkerOutcomes: each way a handler can end lands the job where it should, with the
// counters and events to match.
func TestWorkerOutcomes(t *testing.T) {
	t.Parallel()
	valkeytest.OnTargets(t, func(t *testing.T, tg valkeytest.Target) {
		ctx, c, b, name, q := setup(t, tg, bus.Config{})
		var mu sync.Mutex
		events := map[bus.JobEventType]int{}
		tokens := map[int][]int64{} // args.N -> tokens seen
		w := startWorker(t, b, bus.WorkerConfig{
			Queue: name, Concurrency: 4, MaxAttempts: 3,
			Backoff: func(int64) time.Duration { return 20 * time.Millisecond },
			OnEvent: func(e bus.JobEvent) {
				mu.Lock()
				events[e.Type]++
				mu.Unlock()
			},
		}, func(w *bus.Worker) {
			bus.MustHandle(w, "mixed", func(ctx context.Context, task *bus.Task[args]) error {
				mu.Lock()
				tokens[task.Args.N] = append(tokens[task.Args.N], task.Job.Token)
				mu.Unlock()
				switch task.Args.Mode {
				case "ok":
					return nil
				case "flaky": // fails twice, then succeeds on its third claim
					if task.Job.Token < 3 {
						return errors.New("flaky")
					}
					return nil
				case "always":
					return errors.New("always fails")
				case "skip":
					return bus.SkipRetry(errors.New("poison"))
				case "panic":
					if task.Job.Token == 1 {
						panic("boom")
					}
					return nil
				case "snooze":
					if task.Job.Token == 1 {
						return bus.Snooze(10 * time.Millisecond)
					}
					return nil
				}
				return fmt.Errorf("unknown mode %q", task.Args.Mode)
			}, nil)
			require.NoError(t, bus.HandleRaw(w, "raw", func(ctx context.Context, task *bus.Task[[]byte]) error {
				if string(task.Args) != "raw bytes" {
					return bus.SkipRetry(fmt.Errorf("got %q", task.Args))
				}
				return nil
			}, nil))
		})
		modes := []string{"ok", "flaky", "always", "skip", "panic", "snooze"}
		ids := map[string]keys.JobID{}
		for i, m := range modes {
			e, err := bus.EnqueueTask(ctx, b, name, "mixed", args{N: i, Mode: m}, nil)
			require.NoError(t, err)
			ids[m] = e.ID
		}
		raw, err := bus.Envelope("raw", []byte("raw bytes"))
		require.NoError(t, err)
		_, err = b.Enqueue(ctx, name, raw, nil)
		require.NoError(t, err)
		_, err = b.Enqueue(ctx, name, []byte(`{"not":"an envelope"}`), nil)
		require.NoError(t, err)
		unknown, err := bus.EncodeTask("nobody", args{}, nil)
		require.NoError(t, err)
		_, err = b.Enqueue(ctx, name, unknown, nil)
		require.NoError(t, err)
		bad, err := bus.Envelope("mixed", []byte("not json"))
		require.NoError(t, err)
		_, err = b.Enqueue(ctx, name, bad, nil)
		require.NoError(t, err)

		counts := drained(t, b, name, 30*time.Second)
		valkeytest.Eventually(t, 10*time.Second, "the last replies", func() bool { s := w.Stats(); return s.Completed+s.Dead == 10 })
		// Dead: always (3 attempts), skip, no envelope, unknown kind (3 attempts), bad args.
		require.Equal(t, int64(5), counts.Dead)
		s := w.Stats()
		require.Equal(t, name, s.Queue)
		require.Equal(t, int64(5), s.Completed, "ok, flaky, panic, snooze, raw")
		require.Equal(t, int64(5), s.Dead)
		require.Equal(t, int64(1), s.Snoozed)
		require.Equal(t, int64(2+2+1+2), s.Retried, "flaky 2, always 2, panic 1, unknown 2")
		require.Equal(t, s.Retried+s.Dead, s.Failed)
		require.Equal(t, s.Completed+s.Retried+s.Dead+s.Snoozed, s.Claimed)
		require.Zero(t, s.Stale)
		require.Zero(t, s.LeaseLost)
		require.Zero(t, s.Running)

		mu.Lock()
		require.Equal(t, []int64{1, 2, 3}, tokens[1], "flaky")
		require.Equal(t, []int64{1, 2, 3}, tokens[2], "always")
		require.Equal(t, []int64{1}, tokens[3], "skip")
		require.Equal(t, []int64{1, 2}, tokens[5], "snooze")
		require.Equal(t, int(s.Completed), events[bus.JobCompleted])
		require.Equal(t, int(s.Claimed), events[bus.JobClaimed])
		mu.Unlock()
		for _, m := range []string{"ok", "flaky", "panic", "snooze"} {
			require.Empty(t, row(t, c, q, ids[m]), "%s: the row is retired", m)
		}
		for _, m := range []string{"always", "skip"} {
			require.Equal(t, "dead", row(t, c, q, ids[m])["state"], m)
		}
	})
}

// TestWorkerConcurrencyBound: with concurrency 8 and 200 slow jobs, never more than 8
// handlers run at once (and 8 do, so the bound is what limits), and each job completes once.
func TestWorkerConcurrencyBound(t *testing.T) {
	t.Parallel()
	ctx, _, b, name, _ := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	var now, peak atomic.Int64
	var mu sync.Mutex
	seen := map[int]int{}
	w := startWorker(t, b, bus.WorkerConfig{Queue: name, Concurrency: 8}, func(w *bus.Worker) {
		bus.MustHandle(w, "slow", func(ctx context.Context, task *bus.Task[args]) error {
			n := now.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			defer now.Add(-1)
			mu.Lock()
			seen[task.Args.N]++
			mu.Unlock()
			time.Sleep(10 * time.Millisecond)
			return nil
		}, nil)
	})
	enqueueTasks(t, b, name, "slow", 200, "")
	drained(t, b, name, time.Minute)
	valkeytest.Eventually(t, 10*time.Second, "200 completions", func() bool { return w.Stats().Completed == 200 })
	require.Equal(t, int64(8), peak.Load(), "at most 8 at once, and the bound was reached")
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, seen, 200)
	for n, k := range seen {
		require.Equal(t, 1, k, "job %d ran %d times", n, k)
	}
	counts, err := b.Counts(ctx, name)
	require.NoError(t, err)
	require.Equal(t, bus.Counts{}, counts)
}

// TestCompleteMany: one call retires several jobs, each fenced by its own token; bad input
// writes nothing.
func TestCompleteMany(t *testing.T) {
	t.Parallel()
	valkeytest.OnTargets(t, func(t *testing.T, tg valkeytest.Target) {
		ctx, c, b, name, q := setup(t, tg, bus.Config{})
		_, err := b.EnqueueBatch(ctx, name, payloads(3, "p"), nil)
		require.NoError(t, err)
		jobs, err := b.Claim(ctx, name, &bus.ClaimOpts{Count: 3})
		require.NoError(t, err)
		require.Len(t, jobs, 3)
		_, err = b.CompleteMany(ctx, nil, nil)
		require.ErrorIs(t, err, bus.ErrInvalid)
		other := jobs[1]
		other.Queue = name + "x"
		_, err = b.CompleteMany(ctx, []bus.Job{jobs[0], other}, nil)
		require.ErrorIs(t, err, bus.ErrInvalid)
		zombie := jobs[2]
		zombie.Token = 7
		refused, err := b.CompleteMany(ctx, []bus.Job{jobs[0], zombie, jobs[1], jobs[0]}, nil)
		require.NoError(t, err)
		require.Len(t, refused, 2)
		require.Equal(t, bus.StaleError{Op: "complete", Queue: name, ID: zombie.ID, Token: 7, Reason: bus.TokenMismatch}, *refused[0])
		require.Equal(t, bus.StaleError{Op: "complete", Queue: name, ID: jobs[0].ID, Token: jobs[0].Token, Reason: bus.NoRow}, *refused[1])
		require.ErrorIs(t, refused[0], bus.ErrStale)
		require.Empty(t, row(t, c, q, jobs[0].ID))
		require.Empty(t, row(t, c, q, jobs[1].ID))
		require.Equal(t, "active", row(t, c, q, jobs[2].ID)["state"], "the zombie's complete changed nothing")
		counts, err := b.Counts(ctx, name)
		require.NoError(t, err)
		require.Equal(t, bus.Counts{Active: 1}, counts)
	})
}
