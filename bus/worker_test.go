package bus_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strconv"
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

// quiet is a logger that drops everything: the tests read counters and events instead.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// startWorker makes a worker of cfg over b, lets register add its handlers, starts it, and
// closes it when the test ends.
func startWorker(t *testing.T, b *bus.Bus, cfg bus.WorkerConfig, register func(w *bus.Worker)) *bus.Worker {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	w, err := bus.NewWorker(b, cfg)
	require.NoError(t, err)
	register(w)
	require.NoError(t, w.Start())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, w.Close(ctx))
	})
	return w
}

// args is the test kinds' payload.
type args struct {
	N    int    `json:"n"`
	Mode string `json:"mode,omitempty"`
}

// enqueueTasks enqueues n tasks of kind in one batch, args N = 0..n-1.
func enqueueTasks(t *testing.T, b *bus.Bus, queue, kind string, n int, mode string) []keys.JobID {
	t.Helper()
	jobs := make([]bus.NewJob, n)
	for i := range jobs {
		p, err := bus.EncodeTask(kind, args{N: i, Mode: mode}, nil)
		require.NoError(t, err)
		jobs[i].Payload = p
	}
	out, err := b.EnqueueBatch(context.Background(), queue, jobs, nil)
	require.NoError(t, err)
	ids := make([]keys.JobID, len(out))
	for i, e := range out {
		ids[i] = e.ID
	}
	return ids
}

// drained waits until queue has nothing pending, active or scheduled.
func drained(t *testing.T, b *bus.Bus, queue string, d time.Duration) bus.Counts {
	t.Helper()
	var c bus.Counts
	valkeytest.Eventually(t, d, "queue "+queue+" to drain", func() bool {
		var err error
		c, err = b.Counts(context.Background(), queue)
		require.NoError(t, err)
		return c.Pending == 0 && c.Active == 0 && c.Scheduled == 0
	})
	return c
}

func TestEnvelope(t *testing.T) {
	t.Parallel()
	p, err := bus.Envelope("email.send", []byte(`{"to":"ada"}`))
	require.NoError(t, err)
	require.Equal(t, "email.send\x00{\"to\":\"ada\"}", string(p))
	kind, body, err := bus.ParseEnvelope(p)
	require.NoError(t, err)
	require.Equal(t, "email.send", kind)
	require.Equal(t, `{"to":"ada"}`, string(body))

	for _, tc := range []struct{ name, payload string }{
		{"json", `{"to":"ada"}`},
		{"empty", ""},
		{"no nul", "email.send"},
		{"empty kind", "\x00body"},
		{"bad byte", "email send\x00body"},
		{"kind too long", strings.Repeat("k", 65) + "\x00body"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := bus.ParseEnvelope([]byte(tc.payload))
			require.ErrorIs(t, err, bus.ErrNoEnvelope)
		})
	}
	_, err = bus.Envelope("bad kind", nil)
	require.ErrorIs(t, err, bus.ErrInvalid)
	_, err = bus.Envelope(strings.Repeat("k", 65), nil)
	require.ErrorIs(t, err, keys.ErrInvalid)
	_, _, err = bus.ParseEnvelope([]byte(strings.Repeat("k", 64) + "\x00"))
	require.NoError(t, err, "a kind of 64 bytes is a name")
}

func TestDefaultBackoff(t *testing.T) {
	t.Parallel()
	for attempt, want := range map[int64]time.Duration{1: time.Second, 2: 2 * time.Second, 5: 16 * time.Second, 12: 2048 * time.Second, 13: time.Hour, 1000: time.Hour} {
		for range 50 {
			d := bus.DefaultBackoff(attempt)
			require.GreaterOrEqual(t, d, want/2, "attempt %d", attempt)
			require.LessOrEqual(t, d, want, "attempt %d", attempt)
		}
	}
}

func TestWorkerConfigErrors(t *testing.T) {
	t.Parallel()
	b := newBus(t, valkeytest.Shared(t).Client(t), bus.Config{})
	_, err := bus.NewWorker(nil, bus.WorkerConfig{Queue: "q"})
	require.ErrorIs(t, err, bus.ErrInvalid)
	_, err = bus.NewWorker(b, bus.WorkerConfig{Queue: "bad queue"})
	require.ErrorIs(t, err, keys.ErrInvalid)
	_, err = bus.NewWorker(b, bus.WorkerConfig{Queue: "q", Concurrency: -1})
	require.ErrorIs(t, err, bus.ErrInvalid)

	w, err := bus.NewWorker(b, bus.WorkerConfig{Queue: uniqueName(t)})
	require.NoError(t, err)
	require.ErrorIs(t, w.Start(), bus.ErrInvalid, "no handler")
	noop := func(context.Context, *bus.Task[args]) error { return nil }
	require.NoError(t, bus.Handle(w, "a", noop, nil))
	require.ErrorIs(t, bus.Handle(w, "a", noop, nil), bus.ErrInvalid, "twice")
	require.ErrorIs(t, bus.Handle(w, "b c", noop, nil), keys.ErrInvalid)
	require.ErrorIs(t, bus.Handle[args](w, "b", nil, nil), bus.ErrInvalid)
	require.NoError(t, w.Start())
	require.ErrorIs(t, bus.Handle(w, "late", noop, nil), bus.ErrInvalid, "after Start")
	require.ErrorIs(t, w.Start(), bus.ErrInvalid, "twice")
	require.NoError(t, w.Close(context.Background()))
	require.NoError(t, w.Close(context.Background()), "twice")
	require.ErrorIs(t, w.Start(), bus.ErrWorkerClosed)

	never, err := bus.NewWorker(b, bus.WorkerConfig{Queue: uniqueName(t)})
	require.NoError(t, err)
	require.NoError(t, never.Close(context.Background()), "never started")
}

// TestWorkerHandlerPanic: a handler's panic is the job's error, a *PanicError naming the
// kind, and fails the job like a returned error, even when the panic value is a SkipRetry or
// a Snooze error.
func TestWorkerHandlerPanic(t *testing.T) {
	t.Parallel()
	ctx, _, b, name, _ := setup(t, target{client: valkeytest.Shared(t).Client(t)}, bus.Config{})
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
		require.Contains(t, string(pe.Stack), "worker_test.go", "the stack is the handler's")
		values = append(values, fmt.Sprint(pe.Value))
	}
	require.Contains(t, values, "boom")
	s := w.Stats()
	require.Equal(t, int64(3), s.Retried)
	require.Zero(t, s.Dead)
	require.Zero(t, s.Snoozed)
}

// TestWorkerHeartbeatShorterThanLease: a heartbeat interval that is not shorter than the
// lease it renews (the worker's, the bus's it defaults to, or a kind's) is refused, naming
// the fields; a shorter one, or the default, is accepted.
func TestWorkerHeartbeatShorterThanLease(t *testing.T) {
	t.Parallel()
	b := newBus(t, valkeytest.Shared(t).Client(t), bus.Config{Lease: 10 * time.Second})
	name := uniqueName(t)
	for _, tc := range []struct {
		name string
		cfg  bus.WorkerConfig
	}{
		{"equal", bus.WorkerConfig{Queue: name, Lease: time.Second, HeartbeatInterval: time.Second}},
		{"longer", bus.WorkerConfig{Queue: name, Lease: time.Second, HeartbeatInterval: time.Minute}},
		{"the bus's lease", bus.WorkerConfig{Queue: name, HeartbeatInterval: 10 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := bus.NewWorker(b, tc.cfg)
			require.ErrorIs(t, err, bus.ErrInvalid)
			require.ErrorContains(t, err, "HeartbeatInterval")
			require.ErrorContains(t, err, "Lease")
		})
	}

	w, err := bus.NewWorker(b, bus.WorkerConfig{Queue: name, Lease: time.Second, HeartbeatInterval: 300 * time.Millisecond})
	require.NoError(t, err)
	noop := func(context.Context, *bus.Task[args]) error { return nil }
	err = bus.Handle(w, "short", noop, &bus.HandlerOpts{Lease: 300 * time.Millisecond})
	require.ErrorIs(t, err, bus.ErrInvalid, "a kind's lease no longer than the heartbeat")
	require.ErrorContains(t, err, "HeartbeatInterval")
	require.ErrorContains(t, err, "short")
	require.NoError(t, bus.Handle(w, "long", noop, &bus.HandlerOpts{Lease: time.Minute}))
	require.NoError(t, bus.Handle(w, "default", noop, nil), "the worker's lease")

	w, err = bus.NewWorker(b, bus.WorkerConfig{Queue: name, Lease: time.Second})
	require.NoError(t, err)
	require.NoError(t, bus.Handle(w, "short", noop, &bus.HandlerOpts{Lease: 30 * time.Millisecond}), "the default heartbeat follows the shortest lease")
}

// TestConfigNamesTheField: a negative field of a Config or a WorkerConfig is refused with
// its name.
func TestConfigNamesTheField(t *testing.T) {
	t.Parallel()
	c := valkeytest.Shared(t).Client(t)
	_, err := bus.New(c, bus.Config{UniqueTTL: -time.Second})
	require.ErrorIs(t, err, bus.ErrInvalid)
	require.ErrorContains(t, err, "UniqueTTL")
	b, err := bus.New(c, bus.Config{MaxAttempts: -1, PromoteLimit: -1})
	require.NoError(t, err, "negative MaxAttempts and PromoteLimit mean none")
	_, err = bus.NewWorker(b, bus.WorkerConfig{Queue: "q", WakeTimeout: -time.Second})
	require.ErrorIs(t, err, bus.ErrInvalid)
	require.ErrorContains(t, err, "WakeTimeout")
	_, err = bus.NewWorker(b, bus.WorkerConfig{Queue: "q", JobTimeout: -1, HousekeepInterval: -1})
	require.NoError(t, err, "negative JobTimeout and HousekeepInterval mean none")
}

// TestWorkerOutcomes: each way a handler can end lands the job where it should, with the
// counters and events to match.
func TestWorkerOutcomes(t *testing.T) {
	t.Parallel()
	onTargets(t, func(t *testing.T, tg target) {
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
	ctx, _, b, name, _ := setup(t, target{client: valkeytest.Shared(t).Client(t)}, bus.Config{})
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

// TestWorkerPickupLatency: idle workers blocked on the wake list start a handler soon after
// an enqueue. Reports p50 and p99 of enqueue-to-handler-start over 1,000 jobs, enqueued one
// at a time.
func TestWorkerPickupLatency(t *testing.T) {
	t.Parallel()
	ctx, _, b, name, _ := setup(t, target{client: valkeytest.Shared(t).Client(t)}, bus.Config{})
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
	name := uniqueName(t)
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
	ctx, c, b, name, _ := setup(t, target{client: valkeytest.Shared(t).Client(t)}, bus.Config{})
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

// TestWorkerHeartbeat: a 1 s handler on a 200 ms lease completes with token 1: the heartbeat
// timer's batched extends kept the lease alive while an outside reaper ran every 10 ms (the
// worker's own housekeeping is off, so only the heartbeat renews the lease). It does not call
// t.Parallel: the 200 ms lease is what the test is about, and the crash tests' worker
// processes, which run in parallel, load the machine enough to stall a loop that long.
func TestWorkerHeartbeat(t *testing.T) {
	ctx, c, b, name, q := setup(t, target{client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	tokens := make(chan int64, 4)
	var extended atomic.Int64
	w := startWorker(t, b, bus.WorkerConfig{Queue: name, Lease: 200 * time.Millisecond, HousekeepInterval: -1,
		OnEvent: func(e bus.JobEvent) {
			if e.Type == bus.JobExtended {
				extended.Add(1)
			}
		}}, func(w *bus.Worker) {
		bus.MustHandle(w, "long", func(ctx context.Context, task *bus.Task[args]) error {
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
				return context.Cause(ctx)
			}
			tokens <- task.Job.Token
			return nil
		}, nil)
	})
	reaped := make(chan int, 1)
	stopReaper := make(chan struct{})
	go func() {
		n := 0
		defer func() { reaped <- n }()
		for {
			select {
			case <-stopReaper:
				return
			case <-time.After(10 * time.Millisecond):
			}
			r, err := b.Reap(ctx, name, nil)
			if err == nil {
				n += len(r.Requeued) + len(r.Dead)
			}
		}
	}()
	e, err := bus.EnqueueTask(ctx, b, name, "long", args{}, nil)
	require.NoError(t, err)
	select {
	case tok := <-tokens:
		require.Equal(t, int64(1), tok, "the lease never lapsed")
	case <-time.After(30 * time.Second):
		t.Fatal("the handler did not finish")
	}
	close(stopReaper)
	require.Zero(t, <-reaped, "the outside reaper found no expired lease")
	valkeytest.Eventually(t, 10*time.Second, "the complete", func() bool { return w.Stats().Completed == 1 })
	s := w.Stats()
	require.Equal(t, int64(1), s.Claimed)
	require.Zero(t, s.LeaseLost)
	require.Zero(t, s.Stale)
	require.GreaterOrEqual(t, extended.Load(), int64(5), "about one extend per 67 ms over 1 s")
	t.Logf("%d extends over the 1 s handler", extended.Load())
	require.Empty(t, row(t, c, q, e.ID))
}

// TestWorkerLeaseLost: when a job is reaped from under its handler, the next heartbeat's
// extend answers EMQSTALE and the handler's context is cancelled with ErrLeaseLost; the job
// runs again under a new token.
func TestWorkerLeaseLost(t *testing.T) {
	t.Parallel()
	ctx, c, b, name, q := setup(t, target{client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	started := make(chan struct{}, 1)
	causes := make(chan error, 1)
	w := startWorker(t, b, bus.WorkerConfig{Queue: name, Lease: 200 * time.Millisecond, HousekeepInterval: -1}, func(w *bus.Worker) {
		bus.MustHandle(w, "held", func(ctx context.Context, task *bus.Task[args]) error {
			if task.Job.Token > 1 {
				return nil
			}
			started <- struct{}{}
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return ctx.Err()
		}, nil)
	})
	e, err := bus.EnqueueTask(ctx, b, name, "held", args{}, nil)
	require.NoError(t, err)
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the handler did not start")
	}
	// Expire the lease in the server's own index and reap it, as a reaper would after a
	// missed heartbeat. The heartbeat may renew the deadline between the two: try again.
	valkeytest.Eventually(t, 10*time.Second, "the job to be reaped", func() bool {
		require.NoError(t, c.Do(ctx, c.B().Zadd().Key(q.Active()).Xx().ScoreMember().ScoreMember(0, e.ID.String()).Build()).Error())
		r, err := b.Reap(ctx, name, nil)
		require.NoError(t, err)
		return len(r.Requeued) == 1
	})
	select {
	case cause := <-causes:
		require.ErrorIs(t, cause, bus.ErrLeaseLost)
	case <-time.After(30 * time.Second):
		t.Fatal("the handler's context was not cancelled")
	}
	valkeytest.Eventually(t, 10*time.Second, "the second run to complete", func() bool { return w.Stats().Completed == 1 })
	s := w.Stats()
	require.Equal(t, int64(1), s.LeaseLost)
	require.Equal(t, int64(2), s.Claimed)
	require.Zero(t, s.Stale, "the lost job's outcome is not sent")
	require.Empty(t, row(t, c, q, e.ID))
}

// TestWorkerTimeout: a handler's timeout cancels its context (cause ErrJobTimeout) however
// long heartbeats would keep the lease, and the job is retried.
func TestWorkerTimeout(t *testing.T) {
	t.Parallel()
	ctx, _, b, name, _ := setup(t, target{client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	causes := make(chan error, 4)
	w := startWorker(t, b, bus.WorkerConfig{Queue: name, Lease: time.Minute, MaxAttempts: 2, Backoff: func(int64) time.Duration { return 0 }}, func(w *bus.Worker) {
		bus.MustHandle(w, "stuck", func(ctx context.Context, task *bus.Task[args]) error {
			<-ctx.Done()
			causes <- context.Cause(ctx)
			return ctx.Err()
		}, &bus.HandlerOpts{Timeout: 100 * time.Millisecond})
	})
	_, err := bus.EnqueueTask(ctx, b, name, "stuck", args{}, nil)
	require.NoError(t, err)
	for range 2 {
		select {
		case cause := <-causes:
			require.ErrorIs(t, cause, bus.ErrJobTimeout)
		case <-time.After(30 * time.Second):
			t.Fatal("the timeout did not cancel the handler")
		}
	}
	counts := drained(t, b, name, 10*time.Second)
	require.Equal(t, int64(1), counts.Dead, "two attempts, then dead")
	valkeytest.Eventually(t, 10*time.Second, "the counters", func() bool { s := w.Stats(); return s.Retried == 1 && s.Dead == 1 })
}

// TestCompleteMany: one call retires several jobs, each fenced by its own token; bad input
// writes nothing.
func TestCompleteMany(t *testing.T) {
	t.Parallel()
	onTargets(t, func(t *testing.T, tg target) {
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

// upperCodec is a codec of the test's own: the args are one upper-cased string.
type upperCodec struct{}

func (upperCodec) Marshal(v any) ([]byte, error) { return []byte(strings.ToUpper(*v.(*string))), nil }
func (upperCodec) Unmarshal(data []byte, v any) error {
	*v.(*string) = strings.ToLower(string(data))
	return nil
}

// TestWorkerCodecAndLog: a kind's own codec decodes what the producer's encoded, and the
// worker's slog lines tell what happened to jobs.
func TestWorkerCodecAndLog(t *testing.T) {
	t.Parallel()
	ctx, c, b, name, q := setup(t, target{client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	var logMu sync.Mutex
	var logBuf strings.Builder
	logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		logMu.Lock()
		defer logMu.Unlock()
		return logBuf.Write(p)
	}), &slog.HandlerOptions{Level: slog.LevelInfo}))
	got := make(chan string, 1)
	startWorker(t, b, bus.WorkerConfig{Queue: name, Logger: logger}, func(w *bus.Worker) {
		bus.MustHandle(w, "shout", func(ctx context.Context, task *bus.Task[string]) error {
			got <- task.Args
			return bus.SkipRetry(errors.New("poison"))
		}, &bus.HandlerOpts{Codec: upperCodec{}})
	})
	s := "hello"
	e, err := bus.EnqueueTask(ctx, b, name, "shout", &s, &bus.TaskOpts{Codec: upperCodec{}})
	require.NoError(t, err)
	require.Equal(t, "shout\x00HELLO", row(t, c, q, e.ID)["payload"])
	select {
	case a := <-got:
		require.Equal(t, "hello", a)
	case <-time.After(30 * time.Second):
		t.Fatal("the handler did not run")
	}
	valkeytest.Eventually(t, 10*time.Second, "the dead job's log line", func() bool {
		logMu.Lock()
		defer logMu.Unlock()
		return strings.Contains(logBuf.String(), "level=ERROR msg=\"bus: job dead\" queue="+name+" job="+e.ID.String()+" kind=shout token=1 err=\"bus: skip retries: poison\"")
	})
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestWorkerDamagedQueue: when the server refuses the claim (a queue key holds another type),
// the worker logs and waits for the next wake instead of retrying in a loop.
func TestWorkerDamagedQueue(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Start(t)
	c := srv.Client(t)
	b := newBus(t, c, bus.Config{})
	name := uniqueName(t)
	q := keys.MustQueue(name)
	require.NoError(t, c.Do(context.Background(), c.B().Set().Key(q.Pending()).Value("not a zset").Build()).Error())
	startWorker(t, b, bus.WorkerConfig{Queue: name, WakeTimeout: 500 * time.Millisecond}, func(w *bus.Worker) {
		bus.MustHandle(w, "any", func(ctx context.Context, task *bus.Task[args]) error { return nil }, nil)
	})
	time.Sleep(2 * time.Second) // the quantity measured is what happens over time
	info, err := srv.Do(context.Background(), "INFO", "commandstats")
	require.NoError(t, err)
	calls := int64(0)
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:calls="); ok {
			v, _, _ := strings.Cut(rest, ",")
			calls, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	t.Logf("%d EVALSHA in 2 s against a damaged queue", calls)
	require.Less(t, calls, int64(40), "about one claim per wake timeout, plus housekeeping")
}
