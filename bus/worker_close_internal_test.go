package bus

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/internal/valkeytest"
)

// TestDeadlineBeforeStop: Close with a context that has ended already closes stop and hard
// one right after the other, and the loop's select may take hard first. The deadline then
// stops claiming too: a claim sent now would only bring back jobs to hand back, each with an
// attempt spent.
func TestDeadlineBeforeStop(t *testing.T) {
	t.Parallel()
	b, err := New(valkeytest.Shared(t).Client(t), Config{})
	require.NoError(t, err)
	w, err := NewWorker(b, WorkerConfig{Queue: "deadlinebeforestop", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	MustHandle(w, "work", func(context.Context, *Task[struct{}]) error { return nil }, nil)
	hard := make(chan struct{})
	close(hard)
	w.stop, w.hard = make(chan struct{}), hard // stop not taken yet: the select took hard
	w.blockCtx, w.blockStop = context.WithCancel(context.Background())
	defer w.blockStop()
	w.beatEvery = time.Hour // Start sets it; no other case of the select is ready
	l := newLoop(w)
	defer l.stopTimers()
	l.wait()
	require.True(t, l.pastDeadline)
	claim, _, _ := l.plan()
	require.Zero(t, claim, "no claim past Close's deadline")
	require.True(t, l.draining)
}
