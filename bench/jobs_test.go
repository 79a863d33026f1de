package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
)

// jobArgs are the args of every end-to-end job: the same small JSON object that bench/peers
// enqueues for asynq (`{"order_id":123456,"action":"settle","amount":4200}`).
type jobArgs struct {
	OrderID int64  `json:"order_id"`
	Action  string `json:"action"`
	Amount  int64  `json:"amount"`
}

// quietLog drops the worker's log lines, so they cannot interleave with the result lines.
var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// BenchmarkBusJobs is the EchoMQ worker's end-to-end throughput, measured as bench/peers
// measures asynq (BenchmarkAsynqJobs, the same sub-benchmark names): b.N jobs are enqueued
// before the timer starts (untimed, in batches of 1,000), then a bus.Worker with concurrency
// c and a no-op typed handler (its args are decoded) starts, and the timer stops at the
// b.N-th accepted complete (asynq's stops at the b.N-th handler return). ns/op is per job;
// jobs/s is b.N over that span. The worker's defaults hold but for Concurrency (the
// automatic prefetch buffer included). Run it with a fixed -benchtime (run.sh uses 4000x):
// every b.N tried costs a worker start.
func BenchmarkBusJobs(b *testing.B) {
	for _, c := range []int{1, 8, 20, 100} {
		b.Run(fmt.Sprintf("c=%d", c), func(b *testing.B) { benchBusJobs(b, c) })
	}
}

// BenchmarkBusJobsLanes is BenchmarkBusJobs with every job in one of 100 lanes (the same
// payloads and handler, b.N jobs spread evenly, enqueued lane after lane in batches of at most
// 1,000): the worker claims through laneclaim, serving the 100 lanes in round robin, and
// every completion frees its lane's slot. The rows divide it by BenchmarkBusJobs at the same
// concurrency: what lanes cost end to end.
func BenchmarkBusJobsLanes(b *testing.B) {
	for _, c := range []int{20, 100} {
		b.Run(fmt.Sprintf("c=%d", c), func(b *testing.B) { benchJobs(b, c, 100) })
	}
}

// BenchmarkBusJobsNoPrefetch is BenchmarkBusJobs at concurrency 20 with WorkerConfig.Prefetch
// -1: no prefetch buffer (the default sizes one automatically, as large as the slots for
// no-op handlers). The row divides BenchmarkBusJobs by it: what the buffer buys.
func BenchmarkBusJobsNoPrefetch(b *testing.B) {
	b.Run("c=20", func(b *testing.B) { benchJobsWith(b, 20, 0, -1) })
}

func benchBusJobs(b *testing.B, concurrency int) { benchJobs(b, concurrency, 0) }

// benchJobs runs b.N jobs through a worker of concurrency, in lanes lanes (0: none).
func benchJobs(b *testing.B, concurrency, lanes int) { benchJobsWith(b, concurrency, lanes, 0) }

// benchJobsWith is benchJobs with the worker's Prefetch.
func benchJobsWith(b *testing.B, concurrency, lanes, prefetch int) {
	b.ReportAllocs()
	elapsed := drainJobs(b, concurrency, lanes, prefetch, b.N)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), UnitJobsPerSec)
}

// BenchmarkCompareJobsLanes pairs BenchmarkBusJobsLanes with BenchmarkBusJobs at the same
// concurrency: drains of the same jobs without and with 100 lanes alternate (without first,
// then with first, then without first), each of 5×b.N jobs, and it reports in bench.UnitRatio
// the median over the three pairs of the jobs/s with lanes ÷ the jobs/s without, and each
// side's median jobs/s. The two drains of a pair run a fraction of a second apart on the same
// machine state, where the two standalone benchmarks of a round are a second or more apart and
// drain 4,000 jobs in tens of milliseconds each, so one stall of the machine moves their ratio
// by a third. The rows with 100 active lanes take their ratio from it.
func BenchmarkCompareJobsLanes(b *testing.B) {
	for _, c := range []int{20, 100} {
		b.Run(fmt.Sprintf("c=%d", c), func(b *testing.B) {
			n := 5 * b.N
			var with, without, ratios []float64
			for pair := range 3 {
				order := []int{0, 100}
				if pair%2 == 1 {
					order = []int{100, 0}
				}
				rate := map[int]float64{}
				for _, lanes := range order {
					rate[lanes] = float64(n) / drainJobs(b, c, lanes, 0, n).Seconds()
				}
				with, without = append(with, rate[100]), append(without, rate[0])
				ratios = append(ratios, rate[100]/rate[0])
			}
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(medianOf(with), "lanes-"+UnitJobsPerSec)
			b.ReportMetric(medianOf(without), "plain-"+UnitJobsPerSec)
			b.ReportMetric(medianOf(ratios), UnitRatio)
		})
	}
}

func medianOf(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

// drainJobs enqueues n jobs (untimed) in lanes lanes (0: none), then runs them through a new
// worker of concurrency and prefetch, and returns the time from the worker's start to the n-th
// accepted complete: the span the benchmark's timer runs for.
func drainJobs(b *testing.B, concurrency, lanes, prefetch, n int) time.Duration {
	b.StopTimer()
	ctx := context.Background()
	bb, err := bus.New(valkeytest.Shared(b).Client(b), bus.Config{})
	if err != nil {
		b.Fatal(err)
	}
	queue := UniqueName(b.Name())
	payload, err := bus.EncodeTask("noop", jobArgs{OrderID: 123456, Action: "settle", Amount: 4200}, nil)
	if err != nil {
		b.Fatal(err)
	}
	batch := make([]bus.NewJob, 1000)
	for i := range batch {
		batch[i].Payload = payload
	}
	if lanes == 0 {
		for left := n; left > 0; left -= len(batch) {
			if _, err := bb.EnqueueBatch(ctx, queue, batch[:min(len(batch), left)], nil); err != nil {
				b.Fatal(err)
			}
		}
	}
	for l := range lanes {
		opts := &bus.EnqueueOpts{Lane: fmt.Sprintf("tenant-%d", l)}
		for left := n/lanes + min(1, max(0, n%lanes-l)); left > 0; left -= len(batch) {
			if _, err := bb.EnqueueBatch(ctx, queue, batch[:min(len(batch), left)], opts); err != nil {
				b.Fatal(err)
			}
		}
	}
	var completed atomic.Int64
	done := make(chan struct{})
	w, err := bus.NewWorker(bb, bus.WorkerConfig{Queue: queue, Concurrency: concurrency, Prefetch: prefetch, Logger: quietLog, OnEvent: func(e bus.JobEvent) {
		if e.Type == bus.JobCompleted && completed.Add(1) == int64(n) {
			close(done)
		}
	}})
	if err != nil {
		b.Fatal(err)
	}
	bus.MustHandle(w, "noop", func(context.Context, *bus.Task[jobArgs]) error { return nil }, nil)

	b.ResetTimer()
	b.StartTimer()
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
	return elapsed
}

// BenchmarkBusCeiling is the batched protocol's ceiling, the spike row the worker's
// throughput at concurrency 100 is compared with: b.N jobs are enqueued before the timer (in
// batches of 100), then, with no worker, one claim of 100 and one completemany of the 100
// claimed jobs per 100 jobs, one call after the other, until the queue is empty. ns/op is per
// job; jobs/s is b.N over that span. It is what the scripts and one round trip per call cost
// with nothing else in the way: no handlers, no heartbeats, no hand-offs.
func BenchmarkBusCeiling(b *testing.B) {
	ctx := context.Background()
	bb, err := bus.New(valkeytest.Shared(b).Client(b), bus.Config{})
	if err != nil {
		b.Fatal(err)
	}
	queue := UniqueName(b.Name())
	payload, err := bus.EncodeTask("noop", jobArgs{OrderID: 123456, Action: "settle", Amount: 4200}, nil)
	if err != nil {
		b.Fatal(err)
	}
	const per = 100
	batch := make([]bus.NewJob, per)
	for i := range batch {
		batch[i].Payload = payload
	}
	n := b.N
	for left := n; left > 0; left -= per {
		if _, err := bb.EnqueueBatch(ctx, queue, batch[:min(per, left)], nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	done := 0
	for done < n {
		jobs, err := bb.Claim(ctx, queue, &bus.ClaimOpts{Count: per})
		if err != nil {
			b.Fatal(err)
		}
		if len(jobs) == 0 {
			b.Fatalf("the queue ran dry after %d of %d jobs", done, n)
		}
		refused, err := bb.CompleteMany(ctx, jobs, nil)
		if err != nil || len(refused) > 0 {
			b.Fatalf("completemany: %v, %d refused", err, len(refused))
		}
		done += len(jobs)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(n)/elapsed.Seconds(), UnitJobsPerSec)
}
