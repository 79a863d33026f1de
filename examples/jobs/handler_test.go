package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/echotest"
)

// TestHandleWork runs the example's handler without a server, as a user tests a handler with
// echotest: a flaky task fails its first attempt and completes its second; a plain one
// completes at once.
func TestHandleWork(t *testing.T) {
	t.Parallel()
	w := echotest.NewWorker(t, bus.WorkerConfig{}, "example.work", handleWork, nil)
	ctx := context.Background()
	require.Equal(t, echotest.Completed, w.Work(ctx, t, work{N: 1}, nil).Outcome)
	first := w.Work(ctx, t, work{N: 2, Flaky: true}, nil)
	require.Equal(t, echotest.Failed, first.Outcome)
	require.EqualError(t, first.Err, "flaky: fails on its first attempt")
	require.Equal(t, echotest.Completed, w.Work(ctx, t, work{N: 2, Flaky: true}, &echotest.WorkOpts{Attempt: 2}).Outcome)
}

// TestProduce: what the example's producer enqueues, asserted with echotest against a
// throwaway server: typed tasks, the first half pending, the rest delayed, and the task
// enqueued twice under one key only once.
func TestProduce(t *testing.T) {
	t.Parallel()
	b := echotest.Valkey(t).Bus(t, nil)
	queue := echotest.Name(t)
	var out strings.Builder
	require.NoError(t, produce(context.Background(), b, config{queue: queue, jobs: 7}, &out))
	require.Contains(t, out.String(), "duplicate=true")
	pending := &echotest.RequireOpts{State: bus.StatePending}
	scheduled := &echotest.RequireOpts{State: bus.StateScheduled}
	for n := range 3 {
		echotest.RequireEnqueued(t, b, queue, "example.work", work{N: n, Flaky: n%4 == 1}, pending)
	}
	for n := 3; n < 6; n++ {
		j := echotest.RequireEnqueued(t, b, queue, "example.work", work{N: n, Flaky: n%4 == 1}, scheduled)
		require.WithinDuration(t, time.Now().Add(200*time.Millisecond), j.At, time.Second)
	}
	echotest.RequireEnqueued(t, b, queue, "example.work", work{N: -1}, pending)
	require.Len(t, echotest.Enqueued(t, b, queue), 7, "the second enqueue of the key added nothing")
	echotest.RequireNotEnqueued(t, b, queue, "example.other")
}
