package peers

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bench"
	"github.com/echocache/echocache/internal/valkeytest"
)

// jobPayload is the payload of every job, ours and asynq's: a small JSON
// object like a typical job argument.
var jobPayload = []byte(`{"order_id":123456,"action":"settle","amount":4200}`)

// concurrencies are the worker concurrencies of the end-to-end benchmarks;
// BenchmarkBusJobs uses the same sub-benchmark names.
var concurrencies = []int{1, 8, 20, 100}

// asynqOpt is the connection option for the shared server.
func asynqOpt(b *testing.B) asynq.RedisClientOpt {
	b.Helper()
	return asynq.RedisClientOpt{Addr: valkeytest.Shared(b).Addr}
}

// quietLogger drops asynq's log output (INFO lines on start and stop) so it
// cannot interleave with the benchmark result lines.
type quietLogger struct{}

func (quietLogger) Debug(...any) {}
func (quietLogger) Info(...any)  {}
func (quietLogger) Warn(...any)  {}
func (quietLogger) Error(...any) {}
func (quietLogger) Fatal(args ...any) {
	panic(fmt.Sprint(args...))
}

// BenchmarkAsynqEnqueue is hibiken/asynq's single enqueue: Client.Enqueue of
// one job on a queue that no server drains.
func BenchmarkAsynqEnqueue(b *testing.B) {
	c := asynq.NewClient(asynqOpt(b))
	b.Cleanup(func() { _ = c.Close() })
	q := asynq.Queue(bench.UniqueName(b.Name()))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Enqueue(asynq.NewTask("noop", jobPayload), q); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAsynqJobs is hibiken/asynq's end-to-end throughput: b.N jobs are
// enqueued before the timer starts, then a server with the given concurrency
// and a no-op handler is started and the timer stops when the b.N-th handler
// has returned. ns/op is per job; jobs/s is b.N over that span. Run it with a
// fixed -benchtime (e.g. 3000x): every b.N tried costs a server start.
func BenchmarkAsynqJobs(b *testing.B) {
	for _, c := range concurrencies {
		b.Run(fmt.Sprintf("c=%d", c), func(b *testing.B) { benchAsynqJobs(b, c) })
	}
}

func benchAsynqJobs(b *testing.B, concurrency int) {
	opt := asynqOpt(b)
	queue := bench.UniqueName(b.Name())
	n := b.N
	enqueueAll(b, opt, queue, n)

	var processed atomic.Int64
	done := make(chan struct{})
	handler := asynq.HandlerFunc(func(context.Context, *asynq.Task) error {
		if processed.Add(1) == int64(n) {
			close(done)
		}
		return nil
	})
	srv := asynq.NewServer(opt, asynq.Config{
		Concurrency: concurrency,
		Queues:      map[string]int{queue: 1},
		Logger:      quietLogger{},
		LogLevel:    asynq.ErrorLevel,
		// The queue holds every job before the server starts, so no
		// processor finds it empty until the last job is taken: this
		// interval only shortens the idle sleep that delays Shutdown.
		TaskCheckInterval: 50 * time.Millisecond,
		ShutdownTimeout:   10 * time.Second,
	})

	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	require.NoError(b, srv.Start(handler))
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("asynq processed %d of %d jobs in 5 minutes", processed.Load(), n)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	srv.Shutdown()
	require.Equal(b, int64(n), processed.Load(), "a job ran twice")
	b.ReportMetric(float64(n)/elapsed.Seconds(), bench.UnitJobsPerSec)
}

// enqueueAll enqueues n jobs on queue with a few concurrent clients, so the
// untimed setup stays short.
func enqueueAll(b *testing.B, opt asynq.RedisClientOpt, queue string, n int) {
	b.Helper()
	const workers = 8
	c := asynq.NewClient(opt)
	defer c.Close()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				if _, err := c.Enqueue(asynq.NewTask("noop", jobPayload), asynq.Queue(queue)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	require.NoError(b, <-errs)
}
