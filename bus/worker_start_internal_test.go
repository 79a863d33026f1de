package bus

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// TestStartPastDeadline: jobs whose claim reply is applied after Close's deadline passed
// (the loop took the deadline first) are handed back, not started: cancelHandlers ran
// already, so a handler started now would get a context nothing cancels, and Close would
// wait for it until its JobTimeout, or forever.
func TestStartPastDeadline(t *testing.T) {
	t.Parallel()
	b, err := New(valkeytest.Shared(t).Client(t), Config{})
	require.NoError(t, err)
	w, err := NewWorker(b, WorkerConfig{Queue: "startpastdeadline", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	MustHandle(w, "work", func(context.Context, *Task[struct{}]) error { return nil }, nil)
	l := newLoop(w)
	defer l.stopTimers()
	l.draining = true // Close was called
	l.cancelHandlers()

	r := &inflight{job: Job{Queue: "startpastdeadline", ID: keys.NewJobID(), Token: 1}, kind: "work", h: w.handlers["work"]}
	l.start([]*inflight{r})
	require.Zero(t, l.busy, "no handler runs")
	require.True(t, r.handBack, "the job goes back")
	require.Equal(t, []*inflight{r}, l.outcomes)
	require.Contains(t, l.held, r)
}
