package main

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// seeded is a queue the seed made: its name, its jobs, and the bus that made them.
type seeded struct {
	queue     string
	b         *bus.Bus
	pending   []keys.JobID // oldest first
	scheduled keys.JobID
	dead      []keys.JobID // oldest first
}

type emailArgs struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
}

// seed makes a queue in a known state: a worker (published stats every 50 ms) completed 4
// tasks and sent 2 to dead; then the queue was paused and 3 tasks enqueued (pending) and 1
// scheduled an hour ahead. The worker keeps running (and publishing) until the test ends.
func seed(t *testing.T, srv *valkeytest.Server) seeded {
	t.Helper()
	ctx := context.Background()
	b, err := bus.New(srv.Client(t), bus.Config{})
	require.NoError(t, err)
	s := seeded{queue: valkeytest.TestName(t), b: b}

	w, err := bus.NewWorker(b, bus.WorkerConfig{Queue: s.queue, ID: "w1", Logger: slog.New(slog.DiscardHandler), StatsInterval: 50 * time.Millisecond, Concurrency: 2})
	require.NoError(t, err)
	require.NoError(t, bus.Handle(w, "ok", func(context.Context, *bus.Task[int]) error { return nil }, nil))
	require.NoError(t, bus.Handle(w, "bad", func(context.Context, *bus.Task[int]) error {
		return bus.SkipRetry(errors.New("refused by the test"))
	}, nil))
	require.NoError(t, w.Start())
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = w.Close(cctx)
	})
	for i := range 4 {
		_, err := bus.EnqueueTask(ctx, b, s.queue, "ok", i, nil)
		require.NoError(t, err)
	}
	for i := range 2 {
		e, err := bus.EnqueueTask(ctx, b, s.queue, "bad", i, nil)
		require.NoError(t, err)
		s.dead = append(s.dead, e.ID)
	}
	waitFor(t, "the worker's published stats show 4 completed, 2 dead", func() bool {
		fs, err := b.WorkerStats(ctx, s.queue)
		return err == nil && fs.Total.Completed == 4 && fs.Total.Dead == 2
	})
	require.NoError(t, b.Pause(ctx, s.queue))
	for i, to := range []string{"ada", "grace", "edsger"} {
		e, err := bus.EnqueueTask(ctx, b, s.queue, "email.send", emailArgs{To: to, Subject: "hello " + to}, nil)
		require.NoError(t, err, i)
		s.pending = append(s.pending, e.ID)
	}
	e, err := bus.EnqueueTask(ctx, b, s.queue, "email.send", emailArgs{To: "later"}, &bus.TaskOpts{EnqueueOpts: bus.EnqueueOpts{Delay: time.Hour}})
	require.NoError(t, err)
	s.scheduled = e.ID
	return s
}
