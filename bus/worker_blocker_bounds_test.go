package bus_test

import (
	"context"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
)

// recordingHandler keeps the messages of the records at Error.
type recordingHandler struct {
	mu   sync.Mutex
	msgs []string
}

func (h *recordingHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelError }
func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.msgs = append(h.msgs, r.Message)
	return nil
}
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler      { return h }

func (h *recordingHandler) count(sub string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, m := range h.msgs {
		if strings.Contains(m, sub) {
			n++
		}
	}
	return n
}

// TestWorkerHugeWakeTimeout: a WakeTimeout as large as a Duration goes (an idle worker
// that relies on the wake markers alone) is accepted; the worker must then block on the wake
// list, not give its BLPOP up at once (an overflowed give-up timer) and fall into an error
// backoff that grows without bound while the server is healthy, picking new work up later
// and later.
func TestWorkerHugeWakeTimeout(t *testing.T) {
	t.Parallel()
	b := newBus(t, valkeytest.Shared(t).Client(t), bus.Config{})
	name := valkeytest.TestName(t)
	rec := &recordingHandler{}
	ran := make(chan time.Time, 1)
	startWorker(t, b, bus.WorkerConfig{Queue: name, WakeTimeout: time.Duration(math.MaxInt64), Logger: slog.New(rec)}, func(w *bus.Worker) {
		require.NoError(t, bus.Handle(w, "k", func(context.Context, *bus.Task[args]) error {
			ran <- time.Now()
			return nil
		}, nil))
	})
	time.Sleep(1500 * time.Millisecond) // idle
	sent := time.Now()
	enqueueTasks(t, b, name, "k", 1, "")
	select {
	case at := <-ran:
		require.Less(t, at.Sub(sent), 500*time.Millisecond, "the wake marker should wake the idle worker")
	case <-time.After(5 * time.Second):
		t.Fatal("the job was not picked up")
	}
	require.Zero(t, rec.count("waiting on the wake list"), "a healthy server gave the blocker errors")
}
