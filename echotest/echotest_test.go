package echotest_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/echotest"
	"github.com/echocache/echocache/keys"
)

func TestMain(m *testing.M) { echotest.Main(m) }

type email struct {
	To   string `json:"to"`
	Mode string `json:"mode,omitempty"`
}

// sendEmail is a handler as a user writes one.
func sendEmail(ctx context.Context, t *bus.Task[email]) error {
	switch t.Args.Mode {
	case "fail":
		return errors.New("smtp: 451 try later")
	case "skip":
		return bus.SkipRetry(errors.New("no such mailbox"))
	case "snooze":
		return bus.Snooze(time.Minute)
	case "panic":
		panic("nil map")
	case "slow":
		<-ctx.Done()
		return context.Cause(ctx)
	case "retry-once":
		if t.Job.Token == 1 {
			return errors.New("first attempt fails")
		}
	}
	return nil
}

// TestWorkerRunsOneTask: Work builds the task from the args, runs it through the worker's
// and the kind's middleware in order, and reads the outcome as a worker would.
func TestWorkerRunsOneTask(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var order []string
	mw := func(name string) bus.Middleware {
		return func(next bus.Handler) bus.Handler {
			return func(ctx context.Context, c *bus.Call) error {
				mu.Lock()
				order = append(order, name+":"+c.Queue+"/"+c.Kind+"/"+string(c.Args))
				mu.Unlock()
				return next(ctx, c)
			}
		}
	}
	w := echotest.NewWorker(t, bus.WorkerConfig{Queue: "mail", Middleware: []bus.Middleware{mw("outer")}},
		"email.send", sendEmail, &bus.HandlerOpts{Middleware: []bus.Middleware{mw("inner")}, Timeout: 50 * time.Millisecond})
	ctx := context.Background()

	res := w.Work(ctx, t, email{To: "ada"}, nil)
	require.NoError(t, res.Err)
	require.Equal(t, echotest.Completed, res.Outcome)
	require.Equal(t, []string{`outer:mail/email.send/{"to":"ada"}`, `inner:mail/email.send/{"to":"ada"}`}, order)
	require.Equal(t, "mail", res.Job.Queue)
	require.Equal(t, int64(1), res.Job.Token)
	require.Equal(t, "email.send\x00{\"to\":\"ada\"}", string(res.Job.Payload))
	require.False(t, res.Job.ID.IsZero())

	for mode, want := range map[string]echotest.Outcome{"fail": echotest.Failed, "skip": echotest.Dead, "snooze": echotest.Snoozed, "panic": echotest.Failed} {
		res := w.Work(ctx, t, email{To: "ada", Mode: mode}, nil)
		require.Equal(t, want, res.Outcome, mode)
		require.Error(t, res.Err, mode)
	}
	require.Equal(t, time.Minute, w.Work(ctx, t, email{Mode: "snooze"}, nil).Delay)
	var pe *bus.PanicError
	require.ErrorAs(t, w.Work(ctx, t, email{Mode: "panic"}, nil).Err, &pe)
	require.Equal(t, "nil map", pe.Value)

	slow := w.Work(ctx, t, email{Mode: "slow"}, nil)
	require.ErrorIs(t, slow.Err, bus.ErrJobTimeout, "the kind's timeout ends the handler's context")
	require.GreaterOrEqual(t, slow.Duration, 50*time.Millisecond)

	id := keys.NewJobID()
	require.Equal(t, echotest.Failed, w.Work(ctx, t, email{Mode: "retry-once"}, &echotest.WorkOpts{ID: id}).Outcome)
	second := w.Work(ctx, t, email{Mode: "retry-once"}, &echotest.WorkOpts{ID: id, Attempt: 2})
	require.Equal(t, echotest.Completed, second.Outcome)
	require.Equal(t, id, second.Job.ID)
	require.Equal(t, "completed", second.Outcome.String())
}

// TestWorkerLikeBus: the outcomes of echotest.Worker are the ones a bus.Worker reaches for the
// same handler and args, on a real server.
func TestWorkerLikeBus(t *testing.T) {
	t.Parallel()
	b := echotest.Valkey(t).Bus(t, nil)
	queue := echotest.Name(t)
	cfg := bus.WorkerConfig{Queue: queue, MaxAttempts: 1, HousekeepInterval: -1, StatsInterval: -1,
		Logger: slog.New(slog.DiscardHandler)}
	tw := echotest.NewWorker(t, cfg, "email.send", sendEmail, nil)
	got := map[keys.JobID]bus.JobEventType{}
	var mu sync.Mutex
	done := make(chan struct{}, 8)
	cfg.OnEvent = func(e bus.JobEvent) {
		switch e.Type {
		case bus.JobCompleted, bus.JobDead, bus.JobSnoozed, bus.JobRetried:
			mu.Lock()
			got[e.Job.ID] = e.Type
			mu.Unlock()
			done <- struct{}{}
		}
	}
	w, err := bus.NewWorker(b, cfg)
	require.NoError(t, err)
	bus.MustHandle(w, "email.send", sendEmail, nil)
	require.NoError(t, w.Start())
	t.Cleanup(func() { require.NoError(t, w.Close(context.Background())) })
	want := map[keys.JobID]echotest.Outcome{}
	for _, mode := range []string{"", "fail", "skip", "snooze"} {
		e, err := bus.EnqueueTask(context.Background(), b, queue, "email.send", email{Mode: mode}, nil)
		require.NoError(t, err)
		want[e.ID] = tw.Work(context.Background(), t, email{Mode: mode}, nil).Outcome
	}
	for range want {
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatal("timed out")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	asEvent := map[echotest.Outcome]bus.JobEventType{echotest.Completed: bus.JobCompleted, echotest.Failed: bus.JobDead, echotest.Dead: bus.JobDead, echotest.Snoozed: bus.JobSnoozed}
	for id, o := range want {
		require.Equal(t, asEvent[o], got[id], "job %s: echotest says %s", id, o)
	}
}

// receipt is a handler that keeps a result: the receipt of the email it sent.
func receipt(ctx context.Context, t *bus.Task[email]) error {
	if err := bus.SetResult(ctx, []byte("sent to "+t.Args.To)); err != nil {
		return err
	}
	if t.Args.Mode == "fail" {
		return errors.New("smtp: 451 try later")
	}
	return nil
}

// TestWorkerResults: a kind that keeps results lets its handler call SetResult, and Work
// reports what a bus.Worker keeps: the result of a handler that returned nil, none of one that
// failed; a kind without ResultTTL refuses SetResult as a worker does. A bus.Worker on a real
// server keeps the same result.
func TestWorkerResults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opts := &bus.HandlerOpts{ResultTTL: time.Minute}
	w := echotest.NewWorker(t, bus.WorkerConfig{}, "email.send", receipt, opts)
	res := w.Work(ctx, t, email{To: "ada"}, nil)
	require.NoError(t, res.Err)
	require.True(t, res.Kept)
	require.Equal(t, "sent to ada", string(res.Value))
	res = w.Work(ctx, t, email{To: "ada", Mode: "fail"}, nil)
	require.Equal(t, echotest.Failed, res.Outcome)
	require.False(t, res.Kept, "a failed attempt keeps none")
	require.Nil(t, res.Value)

	plain := echotest.NewWorker(t, bus.WorkerConfig{}, "email.send", receipt, nil).Work(ctx, t, email{To: "ada"}, nil)
	require.ErrorIs(t, plain.Err, bus.ErrInvalid, "without ResultTTL SetResult is refused")
	require.False(t, plain.Kept)
	msg := fails(t, func(tb testing.TB) {
		echotest.NewWorker(tb, bus.WorkerConfig{}, "email.send", receipt, &bus.HandlerOpts{ResultTTL: -1})
	})
	require.Contains(t, msg, "negative ResultTTL")

	b := echotest.Valkey(t).Bus(t, nil)
	queue := echotest.Name(t)
	bw, err := bus.NewWorker(b, bus.WorkerConfig{Queue: queue, StatsInterval: -1, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	bus.MustHandle(bw, "email.send", receipt, opts)
	require.NoError(t, bw.Start())
	t.Cleanup(func() { require.NoError(t, bw.Close(context.Background())) })
	e, err := bus.EnqueueTask(ctx, b, queue, "email.send", email{To: "ada"}, nil)
	require.NoError(t, err)
	var info bus.JobInfo
	require.Eventually(t, func() bool {
		info, err = b.Lookup(ctx, queue, e.ID)
		return err == nil && info.State == bus.StateRetired
	}, 20*time.Second, 10*time.Millisecond)
	require.Equal(t, w.Work(ctx, t, email{To: "ada"}, nil).Value, info.Result, "the bus keeps what echotest reports")
}

// TestRequireEnqueued: the assertions read the pending and schedule sets of a real server.
func TestRequireEnqueued(t *testing.T) {
	t.Parallel()
	b := echotest.Valkey(t).Bus(t, nil)
	queue := echotest.Name(t)
	ctx := context.Background()
	now, err := bus.EnqueueTask(ctx, b, queue, "email.send", email{To: "ada"}, nil)
	require.NoError(t, err)
	later, err := bus.EnqueueTask(ctx, b, queue, "email.send", email{To: "bob"}, &bus.TaskOpts{EnqueueOpts: bus.EnqueueOpts{Delay: time.Hour}})
	require.NoError(t, err)
	_, err = b.Enqueue(ctx, queue, []byte("raw bytes"), nil)
	require.NoError(t, err)

	j := echotest.RequireEnqueued(t, b, queue, "email.send", email{To: "ada"}, nil)
	require.Equal(t, now.ID, j.ID)
	require.Equal(t, bus.StatePending, j.State)
	j = echotest.RequireEnqueued(t, b, queue, "email.send", email{To: "bob"}, &echotest.RequireOpts{State: bus.StateScheduled})
	require.Equal(t, later.ID, j.ID)
	require.WithinDuration(t, time.Now().Add(time.Hour), j.At, time.Minute)
	echotest.RequireNotEnqueued(t, b, queue, "sms.send")

	all := echotest.Enqueued(t, b, queue)
	require.Len(t, all, 3)
	require.Equal(t, "", all[1].Kind, "a payload that is no envelope")
	require.Equal(t, "raw bytes", string(all[1].Args))

	msg := fails(t, func(tb testing.TB) { echotest.RequireEnqueued(tb, b, queue, "email.send", email{To: "eve"}, nil) })
	require.Contains(t, msg, "holds no waiting job of kind email.send")
	require.Contains(t, msg, `{To:eve Mode:}`)
	require.Contains(t, msg, `email.send({"to":"ada"})`, "the failure lists what the queue holds")
	msg = fails(t, func(tb testing.TB) {
		echotest.RequireEnqueued(tb, b, queue, "email.send", email{To: "ada"}, &echotest.RequireOpts{State: bus.StateScheduled})
	})
	require.Contains(t, msg, "no scheduled job of kind email.send")
	msg = fails(t, func(tb testing.TB) { echotest.RequireNotEnqueued(tb, b, queue, "email.send") })
	require.Contains(t, msg, "holds 2 waiting jobs of kind email.send")

	jobs, err := b.Claim(ctx, queue, &bus.ClaimOpts{Count: 10})
	require.NoError(t, err)
	require.Len(t, jobs, 2)
	echotest.RequireNotEnqueued(t, b, queue, "sms.send")
	require.Len(t, echotest.Enqueued(t, b, queue), 1, "claimed jobs are not waiting; the scheduled one is")
}

// TestValkeyMissing: without valkey-server on PATH (and no VALKEY_ADDR), Valkey fails the test
// with a message that says how to install it. Not parallel: it changes PATH.
func TestValkeyMissing(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("VALKEY_ADDR", "")
	msg := fails(t, func(tb testing.TB) { echotest.Valkey(tb) })
	require.Contains(t, msg, "valkey-server is not on PATH")
	require.Contains(t, msg, "install Valkey")
}

// fakeTB records the first failure of f and ends f's goroutine there, as testing does.
type fakeTB struct {
	testing.TB
	msg string
}

func (f *fakeTB) Helper()                   {}
func (f *fakeTB) Fatal(args ...any)         { f.msg = fmt.Sprint(args...); runtime.Goexit() }
func (f *fakeTB) Fatalf(s string, a ...any) { f.msg = fmt.Sprintf(s, a...); runtime.Goexit() }
func (f *fakeTB) Skip(args ...any)          { f.msg = "skip: " + fmt.Sprint(args...); runtime.Goexit() }

// fails runs f with a fakeTB and returns the message it failed with.
func fails(t *testing.T, f func(tb testing.TB)) string {
	t.Helper()
	tb := &fakeTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(tb)
	}()
	<-done
	require.NotEmpty(t, tb.msg, "f did not fail")
	return strings.TrimSpace(tb.msg)
}
