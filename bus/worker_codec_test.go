package bus_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// upperCodec is a codec of the test's own: the args are one upper-cased string.
type upperCodec struct{}

func (upperCodec) Marshal(v any) ([]byte, error) { return []byte(strings.ToUpper(*v.(*string))), nil }
func (upperCodec) Unmarshal(data []byte, v any) error {
	*v.(*string) = strings.ToLower(string(data))
	return nil
}

// TestWorkerCodecAndLog: a kind's own codec decodes what the producer's encoded, and the
// worker's slog lines tell what happened to jobs.
func TestWorkerCodecAndLog(t *testing.T) {
	t.Parallel()
	ctx, c, b, name, q := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	var logMu sync.Mutex
	var logBuf strings.Builder
	logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		logMu.Lock()
		defer logMu.Unlock()
		return logBuf.Write(p)
	}), &slog.HandlerOptions{Level: slog.LevelInfo}))
	got := make(chan string, 1)
	startWorker(t, b, bus.WorkerConfig{Queue: name, Logger: logger}, func(w *bus.Worker) {
		bus.MustHandle(w, "shout", func(ctx context.Context, task *bus.Task[string]) error {
			got <- task.Args
			return bus.SkipRetry(errors.New("poison"))
		}, &bus.HandlerOpts{Codec: upperCodec{}})
	})
	s := "hello"
	e, err := bus.EnqueueTask(ctx, b, name, "shout", &s, &bus.TaskOpts{Codec: upperCodec{}})
	require.NoError(t, err)
	require.Equal(t, "shout\x00HELLO", row(t, c, q, e.ID)["payload"])
	select {
	case a := <-got:
		require.Equal(t, "hello", a)
	case <-time.After(30 * time.Second):
		t.Fatal("the handler did not run")
	}
	valkeytest.Eventually(t, 10*time.Second, "the dead job's log line", func() bool {
		logMu.Lock()
		defer logMu.Unlock()
		return strings.Contains(logBuf.String(), "level=ERROR msg=\"bus: job dead\" queue="+name+" job="+e.ID.String()+" kind=shout token=1 err=\"bus: skip retries: poison\"")
	})
}

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestWorkerDamagedQueue: when the server refuses the claim (a queue key holds another type),
// the worker logs and waits for the next wake instead of retrying in a loop.
func TestWorkerDamagedQueue(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Start(t)
	c := srv.Client(t)
	b := newBus(t, c, bus.Config{})
	name := valkeytest.TestName(t)
	q := keys.MustQueue(name)
	require.NoError(t, c.Do(context.Background(), c.B().Set().Key(q.Pending()).Value("not a zset").Build()).Error())
	startWorker(t, b, bus.WorkerConfig{Queue: name, WakeTimeout: 500 * time.Millisecond}, func(w *bus.Worker) {
		bus.MustHandle(w, "any", func(ctx context.Context, task *bus.Task[args]) error { return nil }, nil)
	})
	time.Sleep(2 * time.Second) // the quantity measured is what happens over time
	info, err := srv.Do(context.Background(), "INFO", "commandstats")
	require.NoError(t, err)
	calls := int64(0)
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:calls="); ok {
			v, _, _ := strings.Cut(rest, ",")
			calls, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	t.Logf("%d EVALSHA in 2 s against a damaged queue", calls)
	require.Less(t, calls, int64(40), "about one claim per wake timeout, plus housekeeping")
}
