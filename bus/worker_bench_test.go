package bus_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
)

// benchJobPayload is the args of every benchmark job: the same small JSON object that
// bench/peers enqueues for asynq.
type benchJobPayload struct {
	OrderID int64  `json:"order_id"`
	Action  string `json:"action"`
	Amount  int64  `json:"amount"`
}

var benchSeq atomic.Int64

// BenchmarkBusJobs is the worker's end-to-end throughput, measured as bench/peers measures
// asynq (BenchmarkAsynqJobs, same sub-benchmark names): b.N jobs are enqueued before the
// timer starts (untimed, in batches), then a worker with concurrency c and a no-op typed
// handler (the args are decoded) starts, and the timer stops at the b.N-th accepted complete
// (asynq's stops at the b.N-th handler return). ns/op is per job; jobs/s is b.N over that
// span. Run it with a fixed -benchtime (e.g. 4000x): every b.N tried costs a worker start.
//
//	go test -run '^$' -bench BusJobs -benchtime 4000x ./bus/
func BenchmarkBusJobs(b *testing.B) {
	for _, c := range []int{1, 8, 20} {
		b.Run(fmt.Sprintf("c=%d", c), func(b *testing.B) { benchBusJobs(b, c) })
	}
}

func benchBusJobs(b *testing.B, concurrency int) {
	ctx := context.Background()
	client := valkeytest.Shared(b).Client(b)
	bb, err := bus.New(client, bus.Config{})
	if err != nil {
		b.Fatal(err)
	}
	queue := fmt.Sprintf("bench-jobs-c%d-%d-%d", concurrency, os.Getpid(), benchSeq.Add(1))
	n := b.N
	payload, err := bus.EncodeTask("noop", benchJobPayload{OrderID: 123456, Action: "settle", Amount: 4200}, nil)
	if err != nil {
		b.Fatal(err)
	}
	batch := make([]bus.NewJob, 1000)
	for i := range batch {
		batch[i].Payload = payload
	}
	for left := n; left > 0; left -= len(batch) {
		if _, err := bb.EnqueueBatch(ctx, queue, batch[:min(len(batch), left)], nil); err != nil {
			b.Fatal(err)
		}
	}
	var completed atomic.Int64
	done := make(chan struct{})
	w, err := bus.NewWorker(bb, bus.WorkerConfig{Queue: queue, Concurrency: concurrency, Logger: quiet, OnEvent: func(e bus.JobEvent) {
		if e.Type == bus.JobCompleted && completed.Add(1) == int64(n) {
			close(done)
		}
	}})
	if err != nil {
		b.Fatal(err)
	}
	bus.MustHandle(w, "noop", func(context.Context, *bus.Task[benchJobPayload]) error { return nil }, nil)

	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	if err := w.Start(); err != nil {
		b.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("%d of %d jobs completed in 5 minutes", completed.Load(), n)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	if err := w.Close(ctx); err != nil {
		b.Fatal(err)
	}
	if s := w.Stats(); s.Completed != int64(n) || s.Claimed != int64(n) {
		b.Fatalf("claimed %d, completed %d of %d", s.Claimed, s.Completed, n)
	}
	b.ReportMetric(float64(n)/elapsed.Seconds(), "jobs/s")
}
