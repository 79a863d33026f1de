package main

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
)

// TestCancelRunning cancels a job a worker's handler is running: emq reports "cancelling"
// (exit 0), the handler's context ends with the cause ErrCancelled, and the job ends dead
// with the failure "cancelled"; cancelling it then is refused (exit 5).
func TestCancelRunning(t *testing.T) {
	t.Parallel()
	srv, b, queue := sharedQueue(t)
	ctx := context.Background()

	started := make(chan struct{}, 1)
	cause := make(chan error, 1)
	w, err := bus.NewWorker(b, bus.WorkerConfig{Queue: queue, Logger: slog.New(slog.DiscardHandler),
		Lease: 2 * time.Second, HeartbeatInterval: 100 * time.Millisecond, StatsInterval: 50 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, bus.Handle(w, "long", func(ctx context.Context, _ *bus.Task[int]) error {
		started <- struct{}{}
		select {
		case <-ctx.Done():
			cause <- context.Cause(ctx)
			return ctx.Err()
		case <-time.After(30 * time.Second):
			cause <- errors.New("the handler was never cancelled")
			return nil
		}
	}, nil))
	require.NoError(t, w.Start())
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = w.Close(cctx)
	})
	e, err := bus.EnqueueTask(ctx, b, queue, "long", 1, nil)
	require.NoError(t, err)
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler never started")
	}

	var ch changed
	okJSON(t, srv.Addr, &ch, "cancel", queue, e.ID.String())
	require.Equal(t, changed{Queue: queue, Action: "cancelling", IDs: []string{e.ID.String()}, Count: 1, State: "active"}, ch)
	select {
	case err := <-cause:
		require.ErrorIs(t, err, bus.ErrCancelled)
	case <-time.After(10 * time.Second):
		t.Fatal("the handler's context was not cancelled")
	}
	var info bus.JobInfo
	waitFor(t, "the cancelled job in dead", func() bool {
		info, err = b.Lookup(ctx, queue, e.ID)
		return err == nil && info.State == bus.StateDead
	})
	require.NotEmpty(t, info.Failures)
	require.Equal(t, "cancelled", info.Failures[len(info.Failures)-1].Error)
	var shown shownJob
	okJSON(t, srv.Addr, &shown, "show", queue, e.ID.String())
	require.Equal(t, "cancelled", shown.Failures[len(shown.Failures)-1].Error)

	// The worker's published counters show the cancel, in emq stats and its table.
	var rows []queueStats
	waitFor(t, "emq stats shows one cancelled job", func() bool {
		okJSON(t, srv.Addr, &rows, "stats", queue)
		return len(rows) == 1 && rows[0].Cancelled == 1
	})
	require.Zero(t, rows[0].LeaseLost)
	text := lines(ok(t, srv.Addr, "stats", queue))
	require.True(t, strings.HasSuffix(text[0], " LEASE LOST CANCELLED"), text[0])
	require.True(t, strings.HasSuffix(text[1], " 0 1"), text[1])
	var frame watchFrame
	okJSON(t, srv.Addr, &frame, "watch", queue, "--count", "1")
	require.Len(t, frame.Queues, 1)
	require.Equal(t, int64(1), frame.Queues[0].Cancelled)

	r := emq(t, srv.Addr, "cancel", queue, e.ID.String())
	require.Equal(t, exitRefused, r.code, "a dead job is purged, not cancelled: %s", r.err)
}

// TestCancelClaimedTwice cancels a job held by a claim that does not heartbeat: the first
// cancel finds it active, the second cancelling; both print "cancelling" and exit 0.
func TestCancelClaimedTwice(t *testing.T) {
	t.Parallel()
	srv, b, queue := sharedQueue(t)
	ctx := context.Background()
	e, err := b.Enqueue(ctx, queue, []byte("p"), nil)
	require.NoError(t, err)
	js, err := b.Claim(ctx, queue, &bus.ClaimOpts{Lease: time.Hour})
	require.NoError(t, err)
	require.Len(t, js, 1)

	require.Equal(t, queue+": cancelling "+e.ID.String()+" (was active)\n", ok(t, srv.Addr, "cancel", queue, e.ID.String()))
	require.Equal(t, queue+": cancelling "+e.ID.String()+" (was cancelling)\n", ok(t, srv.Addr, "cancel", queue, e.ID.String()))
	var shown shownJob
	okJSON(t, srv.Addr, &shown, "show", queue, e.ID.String())
	require.Equal(t, "cancelling", shown.State)
	require.Equal(t, "active", shown.Set)

	// The holder learns it at its next extend.
	_, err = b.Extend(ctx, js[0], nil)
	require.ErrorIs(t, err, bus.ErrCancelled)
}
