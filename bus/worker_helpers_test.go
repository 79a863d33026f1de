package bus_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// quiet is a logger that drops everything: the tests read counters and events instead.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// startWorker makes a worker of cfg over b, lets register add its handlers, starts it, and
// closes it when the test ends.
func startWorker(t *testing.T, b *bus.Bus, cfg bus.WorkerConfig, register func(w *bus.Worker)) *bus.Worker {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	w, err := bus.NewWorker(b, cfg)
	require.NoError(t, err)
	register(w)
	require.NoError(t, w.Start())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, w.Close(ctx))
	})
	return w
}

// args is the test kinds' payload.
type args struct {
	N    int    `json:"n"`
	Mode string `json:"mode,omitempty"`
}

// enqueueTasks enqueues n tasks of kind in one batch, args N = 0..n-1.
func enqueueTasks(t *testing.T, b *bus.Bus, queue, kind string, n int, mode string) []keys.JobID {
	t.Helper()
	jobs := make([]bus.NewJob, n)
	for i := range jobs {
		p, err := bus.EncodeTask(kind, args{N: i, Mode: mode}, nil)
		require.NoError(t, err)
		jobs[i].Payload = p
	}
	out, err := b.EnqueueBatch(context.Background(), queue, jobs, nil)
	require.NoError(t, err)
	ids := make([]keys.JobID, len(out))
	for i, e := range out {
		ids[i] = e.ID
	}
	return ids
}

// drained waits until queue has nothing pending, active or scheduled.
func drained(t *testing.T, b *bus.Bus, queue string, d time.Duration) bus.Counts {
	t.Helper()
	var c bus.Counts
	valkeytest.Eventually(t, d, "queue "+queue+" to drain", func() bool {
		var err error
		c, err = b.Counts(context.Background(), queue)
		require.NoError(t, err)
		return c.Pending == 0 && c.Active == 0 && c.Scheduled == 0
	})
	return c
}
