package echotest_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/echotest"
)

// seen is what a handler of limitedOrSlow observed of its context.
type seen struct {
	err, cause  error
	hasDeadline bool
}

// limitedOrSlow returns RateLimited(time.Minute) for "limited", and for "slow" waits for its
// context to end, reports what it saw on into and returns ctx.Err(), as handlers that test
// errors.Is(err, context.Canceled) or context.DeadlineExceeded do.
func limitedOrSlow(into chan<- seen) func(context.Context, *bus.Task[email]) error {
	return func(ctx context.Context, t *bus.Task[email]) error {
		if t.Args.Mode == "limited" {
			return bus.RateLimited(time.Minute)
		}
		_, ok := ctx.Deadline()
		<-ctx.Done()
		into <- seen{err: ctx.Err(), cause: context.Cause(ctx), hasDeadline: ok}
		return ctx.Err()
	}
}

// TestWorkerTimeoutAndRateLimitedLikeBus: a handler past its kind's timeout sees the context
// a bus.Worker gives it (the deadline reported, ctx.Err context.Canceled, the cause
// ErrJobTimeout), and a handler's RateLimited is read as the worker reads it: a hand-back
// after a delay, not a failure.
func TestWorkerTimeoutAndRateLimitedLikeBus(t *testing.T) {
	t.Parallel()
	b := echotest.Valkey(t).Bus(t, nil)
	queue := echotest.Name(t)
	opts := &bus.HandlerOpts{Timeout: 50 * time.Millisecond}
	events := make(chan bus.JobEvent, 8)
	cfg := bus.WorkerConfig{Queue: queue, MaxAttempts: 1, HousekeepInterval: -1, StatsInterval: -1,
		Logger: slog.New(slog.DiscardHandler), OnEvent: func(e bus.JobEvent) {
			switch e.Type {
			case bus.JobCompleted, bus.JobDead, bus.JobRetried, bus.JobSnoozed, bus.JobRateLimited:
				events <- e
			}
		}}
	inBus, inTest := make(chan seen, 1), make(chan seen, 1)
	w, err := bus.NewWorker(b, cfg)
	require.NoError(t, err)
	bus.MustHandle(w, "email.send", limitedOrSlow(inBus), opts)
	require.NoError(t, w.Start())
	t.Cleanup(func() { require.NoError(t, w.Close(context.Background())) })
	tw := echotest.NewWorker(t, cfg, "email.send", limitedOrSlow(inTest), opts)
	ctx := context.Background()

	next := func() bus.JobEvent {
		t.Helper()
		select {
		case e := <-events:
			return e
		case <-time.After(20 * time.Second):
			t.Fatal("timed out waiting for the worker")
			return bus.JobEvent{}
		}
	}

	// The timeout.
	_, err = bus.EnqueueTask(ctx, b, queue, "email.send", email{Mode: "slow"}, nil)
	require.NoError(t, err)
	want := <-inBus
	require.Equal(t, bus.JobDead, next().Type)
	res := tw.Work(ctx, t, email{Mode: "slow"}, nil)
	got := <-inTest
	require.ErrorIs(t, want.cause, bus.ErrJobTimeout, "the bus worker's cause")
	require.Equal(t, want, got, "the handler sees the context a bus.Worker gives it")
	require.Equal(t, echotest.Failed, res.Outcome)
	require.ErrorIs(t, res.Err, want.err)

	// RateLimited.
	_, err = bus.EnqueueTask(ctx, b, queue, "email.send", email{Mode: "limited"}, nil)
	require.NoError(t, err)
	require.Equal(t, bus.JobRateLimited, next().Type, "the bus worker hands the job back")
	res = tw.Work(ctx, t, email{Mode: "limited"}, nil)
	require.Equal(t, "rate limited", res.Outcome.String(), "not a failure")
	require.Equal(t, time.Minute, res.Delay)
	require.NotEqual(t, echotest.Failed, res.Outcome)
}
