package bench

// The bus's verb rows of the report: enqueue (one job, and batches of 100) and a claim
// followed by its complete, as the peers' enqueue is measured.

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
)

// benchBus makes a bus over a new client and a queue no other benchmark uses.
func benchBus(b *testing.B) (*bus.Bus, string, []byte) {
	b.Helper()
	return benchBusOn(b, valkeytest.Shared(b).Client(b))
}

// benchBusOn is benchBus on the client c.
func benchBusOn(b *testing.B, c valkey.Client) (*bus.Bus, string, []byte) {
	b.Helper()
	bb, err := bus.New(c, bus.Config{})
	require.NoError(b, err)
	payload, err := bus.EncodeTask("noop", jobArgs{OrderID: 123456, Action: "settle", Amount: 4200}, nil)
	require.NoError(b, err)
	return bb, UniqueName(b.Name()), payload
}

// BenchmarkBusEnqueue: one job per op (single), or batches of 100 with ns/op per job (batch).
func BenchmarkBusEnqueue(b *testing.B) {
	ctx := context.Background()
	b.Run("single", func(b *testing.B) {
		bb, queue, payload := benchBus(b)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := bb.Enqueue(ctx, queue, payload, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("batch", func(b *testing.B) {
		bb, queue, payload := benchBus(b)
		batch := make([]bus.NewJob, 100)
		for i := range batch {
			batch[i].Payload = payload
		}
		b.ReportAllocs()
		b.ResetTimer()
		for left := b.N; left > 0; left -= len(batch) {
			if _, err := bb.EnqueueBatch(ctx, queue, batch[:min(len(batch), left)], nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// claimCompleteSide claims one pending job and completes it with its token; the queue is
// filled (untimed, in batches) before it is used.
func claimCompleteSide(b *testing.B) Side {
	return claimCompleteSideOn(b, valkeytest.Shared(b).Client(b))
}

// claimCompleteSideOn is claimCompleteSide over a bus on the client c.
func claimCompleteSideOn(b *testing.B, c valkey.Client) Side {
	ctx := context.Background()
	bb, queue, payload := benchBusOn(b, c)
	batch := make([]bus.NewJob, 1000)
	for i := range batch {
		batch[i].Payload = payload
	}
	return Side{Name: "claim-complete", Op: func(b *testing.B) {
		jobs, err := bb.Claim(ctx, queue, nil)
		if err != nil {
			b.Fatal(err)
		}
		if len(jobs) == 0 { // refill, then claim again: a refill per 1,000 ops
			// Untimed in the standalone benchmark (about 10 µs a job, 3% of an op); in
			// Compare, whose blocks time themselves, the block with the refill is one of
			// hundreds and the median ratio passes it by.
			b.StopTimer()
			if _, err := bb.EnqueueBatch(ctx, queue, batch, nil); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if jobs, err = bb.Claim(ctx, queue, nil); err != nil || len(jobs) == 0 {
				b.Fatalf("claim after refill: %d jobs, %v", len(jobs), err)
			}
		}
		if err := bb.Complete(ctx, jobs[0], nil); err != nil {
			b.Fatal(err)
		}
	}}
}

// BenchmarkBusClaimComplete: one claim and its complete per op.
func BenchmarkBusClaimComplete(b *testing.B) {
	side := claimCompleteSide(b)
	b.ReportAllocs()
	for b.Loop() {
		side.Op(b)
	}
}

// BenchmarkCompareClaimComplete interleaves claim+complete with one raw GET round trip, on
// the bus's client.
func BenchmarkCompareClaimComplete(b *testing.B) {
	c := valkeytest.Shared(b).Client(b)
	b.ReportAllocs()
	Compare(b, claimCompleteSideOn(b, c), getSideOn(b, c, "get"))
}
