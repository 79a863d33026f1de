package bus_test

import (
	"context"
	"encoding/json"
	"errors"
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

// trace is a middleware that logs "<name>>" before next and "<<name>" after it, in the job's
// own log (by the args' N).
type trace struct {
	mu    sync.Mutex
	logs  map[int][]string
	wraps atomic.Int64 // how many times a middleware was applied (once per kind)
}

func (tr *trace) log(c *bus.Call, s string) {
	var a args
	_ = json.Unmarshal(c.Args, &a)
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.logs[a.N] = append(tr.logs[a.N], s)
}

func (tr *trace) mw(name string) bus.Middleware {
	return func(next bus.Handler) bus.Handler {
		tr.wraps.Add(1)
		return func(ctx context.Context, c *bus.Call) error {
			tr.log(c, name+">")
			err := next(ctx, c)
			tr.log(c, "<"+name)
			return err
		}
	}
}

func (tr *trace) get(n int) string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return strings.Join(tr.logs[n], " ")
}

// TestMiddlewareOrder: the worker's middleware runs outermost, in its declared order, then
// the kind's, in its declared order, then the handler; each is applied once per kind, at
// registration, not per job.
func TestMiddlewareOrder(t *testing.T) {
	t.Parallel()
	ctx, _, b, name, _ := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	tr := &trace{logs: map[int][]string{}}
	handler := func(_ context.Context, task *bus.Task[args]) error {
		tr.mu.Lock()
		tr.logs[task.Args.N] = append(tr.logs[task.Args.N], "h")
		tr.mu.Unlock()
		return nil
	}
	startWorker(t, b, bus.WorkerConfig{Queue: name, Middleware: []bus.Middleware{tr.mw("A"), tr.mw("B")}}, func(w *bus.Worker) {
		bus.MustHandle(w, "own", handler, &bus.HandlerOpts{Middleware: []bus.Middleware{tr.mw("C"), tr.mw("D")}})
		bus.MustHandle(w, "plain", handler, nil)
	})
	require.Equal(t, int64(6), tr.wraps.Load(), "A, B, C, D for own; A, B for plain")
	for i := range 20 {
		kind := "own"
		if i%2 == 1 {
			kind = "plain"
		}
		_, err := bus.EnqueueTask(ctx, b, name, kind, args{N: i}, nil)
		require.NoError(t, err)
	}
	drained(t, b, name, 20*time.Second)
	for i := range 20 {
		want := "A> B> C> D> h <D <C <B <A"
		if i%2 == 1 {
			want = "A> B> h <B <A"
		}
		require.Equal(t, want, tr.get(i), "job %d", i)
	}
	require.Equal(t, int64(6), tr.wraps.Load(), "no middleware is applied per job")
}

// TestMiddlewareSees: a middleware sees the queue, kind, job and encoded args; it sees the
// handler's error (a panic as a *PanicError) and can time the call; it may answer without
// calling the handler. The worker's events report the same errors.
func TestMiddlewareSees(t *testing.T) {
	t.Parallel()
	ctx, _, b, name, _ := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	type seen struct {
		call bus.Call
		err  error
		dur  time.Duration
	}
	var mu sync.Mutex
	got := map[int]seen{}
	var ran atomic.Int64
	observe := func(next bus.Handler) bus.Handler {
		return func(ctx context.Context, c *bus.Call) error {
			var a args
			_ = json.Unmarshal(c.Args, &a) // not require: this runs on a handler goroutine
			if a.Mode == "refuse" {
				return bus.SkipRetry(errors.New("refused by middleware"))
			}
			start := time.Now()
			err := next(ctx, c)
			mu.Lock()
			got[a.N] = seen{*c, err, time.Since(start)}
			mu.Unlock()
			return err
		}
	}
	events := make(chan bus.JobEvent, 64)
	startWorker(t, b, bus.WorkerConfig{Queue: name, Middleware: []bus.Middleware{observe}, MaxAttempts: 1,
		OnEvent: func(e bus.JobEvent) {
			if e.Type == bus.JobDead || e.Type == bus.JobCompleted {
				events <- e
			}
		}}, func(w *bus.Worker) {
		bus.MustHandle(w, "k", func(_ context.Context, task *bus.Task[args]) error {
			ran.Add(1)
			switch task.Args.Mode {
			case "slow":
				time.Sleep(30 * time.Millisecond)
				return errors.New("boom")
			case "panic":
				panic("kaboom")
			}
			return nil
		}, nil)
	})
	modes := []string{"ok", "slow", "panic", "refuse"}
	ids := map[int]keys.JobID{}
	for i, m := range modes {
		e, err := bus.EnqueueTask(ctx, b, name, "k", args{N: i, Mode: m}, nil)
		require.NoError(t, err)
		ids[i] = e.ID
	}
	byID := map[keys.JobID]bus.JobEvent{}
	for range modes {
		select {
		case e := <-events:
			byID[e.Job.ID] = e
		case <-time.After(20 * time.Second):
			t.Fatal("timed out waiting for the outcomes")
		}
	}
	require.Equal(t, int64(3), ran.Load(), "the refusing middleware did not call the handler")
	mu.Lock()
	defer mu.Unlock()

	ok := got[0]
	require.NoError(t, ok.err)
	require.Equal(t, name, ok.call.Queue)
	require.Equal(t, "k", ok.call.Kind)
	require.Equal(t, ids[0], ok.call.Job.ID)
	require.Equal(t, int64(1), ok.call.Job.Token)
	require.JSONEq(t, `{"n":0,"mode":"ok"}`, string(ok.call.Args))
	require.Equal(t, "k\x00"+string(ok.call.Args), string(ok.call.Job.Payload), "Job.Payload is the envelope")
	require.Equal(t, bus.JobCompleted, byID[ids[0]].Type)

	slow := got[1]
	require.EqualError(t, slow.err, "boom")
	require.GreaterOrEqual(t, slow.dur, 30*time.Millisecond, "the middleware timed the handler")
	require.Equal(t, bus.JobDead, byID[ids[1]].Type)
	require.EqualError(t, byID[ids[1]].Err, "boom")

	var pe *bus.PanicError
	require.ErrorAs(t, got[2].err, &pe, "the handler's panic reaches the middleware as a *PanicError")
	require.Equal(t, "kaboom", pe.Value)
	require.ErrorAs(t, byID[ids[2]].Err, &pe)

	_, called := got[3]
	require.False(t, called)
	require.Equal(t, bus.JobDead, byID[ids[3]].Type)
	require.ErrorIs(t, byID[ids[3]].Err, bus.ErrSkipRetry)
}

// TestChainAndTaskHandler: Chain nests in declared order; TaskHandler decodes as Handle does
// (args that do not decode skip retries).
func TestChainAndTaskHandler(t *testing.T) {
	t.Parallel()
	var order []string
	mw := func(name string) bus.Middleware {
		return func(next bus.Handler) bus.Handler {
			return func(ctx context.Context, c *bus.Call) error {
				order = append(order, name)
				return next(ctx, c)
			}
		}
	}
	var got args
	h := bus.TaskHandler(func(_ context.Context, task *bus.Task[args]) error {
		order = append(order, "h:"+task.Kind)
		got = task.Args
		return nil
	}, nil)
	chained := bus.Chain(h, mw("1"), mw("2"), mw("3"))
	require.NoError(t, chained(context.Background(), &bus.Call{Kind: "k", Args: []byte(`{"n":7}`)}))
	require.Equal(t, []string{"1", "2", "3", "h:k"}, order)
	require.Equal(t, args{N: 7}, got)
	err := chained(context.Background(), &bus.Call{Kind: "k", Args: []byte(`not json`)})
	require.ErrorIs(t, err, bus.ErrSkipRetry)
	require.Contains(t, err.Error(), "decoding the args of kind k")
	require.NoError(t, bus.Chain(h)(context.Background(), &bus.Call{Kind: "k", Args: []byte(`{}`)}), "no middleware")
}

// TestMiddlewareValidated: a nil middleware is refused where it is declared.
func TestMiddlewareValidated(t *testing.T) {
	t.Parallel()
	b := newBus(t, valkeytest.Shared(t).Client(t), bus.Config{})
	w, err := bus.NewWorker(b, bus.WorkerConfig{Queue: valkeytest.TestName(t)})
	require.NoError(t, err)
	err = bus.Handle(w, "k", func(context.Context, *bus.Task[args]) error { return nil }, &bus.HandlerOpts{Middleware: []bus.Middleware{nil}})
	require.ErrorIs(t, err, bus.ErrInvalid)
	require.Contains(t, err.Error(), "Middleware[0]")
}
