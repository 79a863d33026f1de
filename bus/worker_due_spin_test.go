package bus_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
)

// TestWorkerDueHeadNoSpin: a scheduled job that is due but that the worker cannot take
// yet (every slot is busy; or claims do not promote, Config.PromoteLimit < 0) must not make the
// worker read the schedule's head again every millisecond: it would send a round trip per
// millisecond, for as long as the slots stay busy or until housekeeping promotes the job.
func TestWorkerDueHeadNoSpin(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		promote int  // Config.PromoteLimit
		fill    bool // occupy every slot once the retry is scheduled
	}{
		{"full worker", 0, true},
		{"no promote on claim", -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newBus(t, valkeytest.Shared(t).Client(t), bus.Config{PromoteLimit: tc.promote})
			name := valkeytest.TestName(t)
			release := make(chan struct{})
			retried := make(chan struct{}, 1)
			w := startWorker(t, b, bus.WorkerConfig{Queue: name, Concurrency: 2, HousekeepInterval: time.Minute, OnEvent: func(e bus.JobEvent) {
				if e.Type == bus.JobRetried {
					select {
					case retried <- struct{}{}:
					default:
					}
				}
			}}, func(w *bus.Worker) {
				require.NoError(t, bus.Handle(w, "block", func(ctx context.Context, _ *bus.Task[args]) error {
					select {
					case <-release:
					case <-ctx.Done():
					}
					return nil
				}, nil))
				require.NoError(t, bus.Handle(w, "fail", func(context.Context, *bus.Task[args]) error {
					return errors.New("again later")
				}, &bus.HandlerOpts{Backoff: func(int64) time.Duration { return 100 * time.Millisecond }}))
			})
			t.Cleanup(func() { close(release) }) // before the worker's Close
			enqueueTasks(t, b, name, "fail", 1, "")
			select {
			case <-retried:
			case <-time.After(5 * time.Second):
				t.Fatal("no retry")
			}
			if tc.fill {
				enqueueTasks(t, b, name, "block", 2, "")
				valkeytest.Eventually(t, 5*time.Second, "both slots busy", func() bool { return w.Stats().Running == 2 })
			}
			time.Sleep(300 * time.Millisecond) // the retry is due now, and stays in schedule
			before := w.Stats().RoundTrips
			time.Sleep(time.Second)
			trips := w.Stats().RoundTrips - before
			require.Less(t, trips, int64(50), "round trips in a second while the due job waits")
		})
	}
}
