package bus_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
)

// TestWorkerHugeConcurrency: NewWorker accepts any Concurrency that is not negative, so
// the largest int (an "unbounded" worker) must run jobs, not overflow its claim arithmetic
// into a worker that never claims.
func TestWorkerHugeConcurrency(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                  string
		concurrency, prefetch int
	}{
		{"max", math.MaxInt, 0},
		{"max with prefetch", math.MaxInt - 10, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newBus(t, valkeytest.Shared(t).Client(t), bus.Config{})
			name := valkeytest.TestName(t)
			done := make(chan struct{}, 4)
			startWorker(t, b, bus.WorkerConfig{Queue: name, Concurrency: tc.concurrency, Prefetch: tc.prefetch, WakeTimeout: 50 * time.Millisecond}, func(w *bus.Worker) {
				require.NoError(t, bus.Handle(w, "k", func(context.Context, *bus.Task[args]) error {
					done <- struct{}{}
					return nil
				}, nil))
			})
			enqueueTasks(t, b, name, "k", 2, "")
			for range 2 {
				select {
				case <-done:
				case <-time.After(5 * time.Second):
					t.Fatal("the worker ran no job")
				}
			}
			drained(t, b, name, 5*time.Second)
		})
	}
}

// TestWorkerHousekeepLimitBound: a HousekeepLimit the scripts refuse (more than 15 digits)
// is NewWorker's error naming the field, not a worker whose every reap and promote fails.
func TestWorkerHousekeepLimitBound(t *testing.T) {
	t.Parallel()
	b := newBus(t, valkeytest.Shared(t).Client(t), bus.Config{})
	_, err := bus.NewWorker(b, bus.WorkerConfig{Queue: valkeytest.TestName(t), HousekeepLimit: 1_000_000_000_000_000})
	require.ErrorIs(t, err, bus.ErrInvalid)
	require.ErrorContains(t, err, "HousekeepLimit")
	_, err = bus.NewWorker(b, bus.WorkerConfig{Queue: valkeytest.TestName(t), HousekeepLimit: 999_999_999_999_999})
	require.NoError(t, err)
}
