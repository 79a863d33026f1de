package bus_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
)

// Benchmarks report per-job costs of the verbs against the shared throwaway server; compare
// the sub-benchmarks with each other (ratios), not with other machines.
//
//	go test -run '^$' -bench . ./bus/

func benchBus(b *testing.B) *bus.Bus {
	b.Helper()
	bb, err := bus.New(valkeytest.Shared(b).Client(b), bus.Config{})
	if err != nil {
		b.Fatal(err)
	}
	return bb
}

// BenchmarkEnqueue: one job per round trip against a batch of 100 per round trip.
func BenchmarkEnqueue(b *testing.B) {
	ctx := context.Background()
	bb := benchBus(b)
	payload := []byte("benchmark payload")
	b.Run("single", func(b *testing.B) {
		b.ReportAllocs()
		q := "bench-enqueue-single-" + strconv.Itoa(b.N)
		for b.Loop() {
			if _, err := bb.Enqueue(ctx, q, payload, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("batch100", func(b *testing.B) {
		b.ReportAllocs()
		q := "bench-enqueue-batch-" + strconv.Itoa(b.N)
		jobs := make([]bus.NewJob, 100)
		for i := range jobs {
			jobs[i].Payload = payload
		}
		n := 0
		for b.Loop() {
			if n%100 == 0 {
				if _, err := bb.EnqueueBatch(ctx, q, jobs, nil); err != nil {
					b.Fatal(err)
				}
			}
			n++
		}
	})
}

// BenchmarkClaim: claiming one job per round trip against 100 per round trip (per job).
func BenchmarkClaim(b *testing.B) {
	ctx := context.Background()
	bb := benchBus(b)
	for _, count := range []int{1, 100} {
		b.Run("count"+strconv.Itoa(count), func(b *testing.B) {
			q := "bench-claim-" + strconv.Itoa(count) + "-" + strconv.Itoa(b.N)
			jobs := make([]bus.NewJob, 1000)
			for i := range jobs {
				jobs[i].Payload = []byte("p")
			}
			for range b.N/1000 + 1 {
				if _, err := bb.EnqueueBatch(ctx, q, jobs, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for claimed := 0; claimed < b.N; {
				got, err := bb.Claim(ctx, q, &bus.ClaimOpts{Count: count, PromoteLimit: -1})
				if err != nil || len(got) == 0 {
					b.Fatal(err, len(got))
				}
				claimed += len(got)
			}
		})
	}
}

// BenchmarkCycle: a worker's step, complete then claim in two round trips against
// CompleteAndClaim in one.
func BenchmarkCycle(b *testing.B) {
	ctx := context.Background()
	bb := benchBus(b)
	for _, fused := range []bool{false, true} {
		name := "CompleteThenClaim"
		if fused {
			name = "CompleteAndClaim"
		}
		b.Run(name, func(b *testing.B) {
			q := "bench-cycle-" + name + "-" + strconv.Itoa(b.N)
			jobs := make([]bus.NewJob, 1000)
			for i := range jobs {
				jobs[i].Payload = []byte("p")
			}
			for range b.N/1000 + 2 { // b.N+1 jobs at least
				if _, err := bb.EnqueueBatch(ctx, q, jobs, nil); err != nil {
					b.Fatal(err)
				}
			}
			held, err := bb.Claim(ctx, q, nil)
			if err != nil || len(held) != 1 {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if fused {
					held, err = bb.CompleteAndClaim(ctx, held[0], nil)
				} else {
					if err = bb.Complete(ctx, held[0], nil); err == nil {
						held, err = bb.Claim(ctx, q, nil)
					}
				}
				if err != nil || len(held) != 1 {
					b.Fatal(err, len(held))
				}
			}
		})
	}
}
