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

// TestAutoPrefetchSize: the automatic buffer is Concurrency × round trip ÷ handler run time,
// rounded down, at most Concurrency and MaxPrefetch, and none before both means have a sample.
func TestAutoPrefetchSize(t *testing.T) {
	t.Parallel()
	var a autoPrefetch
	require.Zero(t, a.size(10), "no sample yet")
	a.noteTrip(time.Millisecond)
	require.Zero(t, a.size(10), "no handler returned yet")
	a.noteHandler(2 * time.Millisecond)
	require.Equal(t, 5, a.size(10), "10 slots of 2 ms handlers free 5 during a round trip of 1 ms")
	a = autoPrefetch{}
	a.noteTrip(time.Millisecond)
	a.noteHandler(20 * time.Millisecond)
	require.Zero(t, a.size(10), "handlers longer than 10 round trips: nothing")
	a = autoPrefetch{}
	a.noteTrip(time.Millisecond)
	a.noteHandler(0)
	require.Equal(t, 10, a.size(10), "at most Concurrency")
	require.Equal(t, MaxPrefetch, a.size(maxConcurrency), "at most MaxPrefetch")
}

// TestAutoPrefetchFailedTrip: a round trip whose scripts were not answered (a timeout after
// maxTripTimeout, here) leaves the round-trip mean alone; an answered one moves it.
func TestAutoPrefetchFailedTrip(t *testing.T) {
	t.Parallel()
	b, err := New(valkeytest.Shared(t).Client(t), Config{})
	require.NoError(t, err)
	w, err := NewWorker(b, WorkerConfig{Queue: "autoprefetchfailedtrip", Concurrency: 10, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	w.beatEvery = time.Hour
	l := newLoop(w)
	defer l.stopTimers()
	l.auto.noteHandler(10 * time.Millisecond)
	l.auto.noteTrip(200 * time.Microsecond)
	require.Zero(t, l.buffer(), "10 ms handlers, 200 µs round trips: no buffer")

	l.claiming = 5
	l.apply(&roundTrip{steps: []step{l.claimStep(5)}, claim: 5, out: []result{{err: context.DeadlineExceeded}}, flight: maxTripTimeout})
	require.True(t, l.waitingRetry, "the round trip failed")
	require.Zero(t, l.buffer(), "a timed-out round trip is no sample")
	require.InDelta(t, float64(200*time.Microsecond), l.auto.trip, 1)

	answered := step{reply: func(result) bool { return true }}
	l.apply(&roundTrip{steps: []step{answered}, out: []result{{}}, flight: 300 * time.Microsecond})
	require.InDelta(t, float64(210*time.Microsecond), l.auto.trip, 1, "an answered round trip moves the mean by a tenth of the difference")
}
