package bus_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
)

// TestCloseResendsCutComplete: a handler returned nil and its complete is in flight,
// slow on the server, when Close's deadline passes. As Close's doc says, what is in flight
// then still has handBackTimeout (a round trip cut short is sent again within it): the job is
// retired, not left active to its lease, where a reap would hand it to another worker and run
// it a second time.
func TestCloseResendsCutComplete(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Start(t, valkeytest.WithoutPersistence())
	c := srv.Client(t)
	ctx := context.Background()
	name := valkeytest.TestName(t)
	b := newBus(t, c, bus.Config{})
	ids := enqueueTasks(t, b, name, "work", 1, "")

	started, release := make(chan struct{}), make(chan struct{})
	var completed atomic.Int64
	w, err := bus.NewWorker(b, bus.WorkerConfig{
		Queue: name, Concurrency: 1, HousekeepInterval: -1, StatsInterval: -1, Logger: quiet,
		OnEvent: func(e bus.JobEvent) {
			if e.Type == bus.JobCompleted {
				completed.Add(1)
			}
		},
	})
	require.NoError(t, err)
	bus.MustHandle(w, "work", func(ctx context.Context, task *bus.Task[args]) error {
		close(started)
		<-release
		return nil
	}, nil)
	require.NoError(t, w.Start())
	<-started

	// Writes stall on the server for 1.5 s: the complete the handler's return sends waits there.
	_, err = srv.Do(ctx, "CLIENT", "PAUSE", "1500", "WRITE")
	require.NoError(t, err)
	paused := time.Now()
	close(release)
	time.Sleep(200 * time.Millisecond) // the complete is in flight

	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	err = w.Close(cctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	t.Logf("Close returned %v after the pause began", time.Since(paused))

	// Let the pause end, then look at the job.
	time.Sleep(time.Until(paused.Add(1600 * time.Millisecond)))
	info, err := b.Lookup(ctx, name, ids[0])
	if err == nil {
		t.Fatalf("the job whose handler returned nil is still %s (attempts %d) after Close: its complete was abandoned, a reap will run it again", info.State, info.Attempts)
	}
	require.True(t, errors.Is(err, bus.ErrNotFound), "%v", err)
	require.EqualValues(t, 1, completed.Load())
}
