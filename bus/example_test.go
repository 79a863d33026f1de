package bus_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// The examples run against the test process's shared valkey-server (or VALKEY_ADDR).

// exampleTB lets an example reach the shared server: valkeytest asks its callers for a
// testing.TB, which an example has not. Only Helper and Fatalf are called.
type exampleTB struct{ testing.TB }

func (exampleTB) Helper()                           {}
func (exampleTB) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

// serverAddr is the shared server's address.
func serverAddr() string { return valkeytest.Shared(exampleTB{}).Addr }

// exampleQueue is a queue name of its own for each run: the server keeps what earlier runs
// (-count) left.
func exampleQueue(name string) string { return name + "." + keys.NewJobID().String()[4:] }

// exampleBus is a Bus over a new client of the shared server and a fresh queue; close
// closes the client.
func exampleBus(name string) (b *bus.Bus, queue string, close func()) {
	client, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{serverAddr()}, DisableCache: true})
	if err != nil {
		panic(err)
	}
	b, err = bus.New(client, bus.Config{})
	if err != nil {
		panic(err)
	}
	return b, exampleQueue(name), client.Close
}

// The producer's and the consumer's verbs: enqueue (now, later, once per key), claim a batch,
// complete each job; a complete of a job no longer held answers ErrStale.
func Example() {
	ctx := context.Background()
	client, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{serverAddr()}, DisableCache: true})
	if err != nil {
		panic(err)
	}
	defer client.Close()
	b, err := bus.New(client, bus.Config{})
	if err != nil {
		panic(err)
	}
	queue := exampleQueue("emails")

	// Producer: one job now, one in ten minutes, one only once per order.
	if _, err := b.Enqueue(ctx, queue, []byte(`{"to":"ada"}`), nil); err != nil {
		panic(err)
	}
	if _, err := b.Enqueue(ctx, queue, []byte(`{"to":"bob"}`), &bus.EnqueueOpts{Delay: 10 * time.Minute}); err != nil {
		panic(err)
	}
	first, err := b.Enqueue(ctx, queue, []byte(`{"order":42}`), &bus.EnqueueOpts{UniqueKey: "order-42"})
	if err != nil {
		panic(err)
	}
	again, err := b.Enqueue(ctx, queue, []byte(`{"order":42}`), &bus.EnqueueOpts{UniqueKey: "order-42"})
	if err != nil {
		panic(err)
	}
	fmt.Println("the second enqueue of order-42 is a duplicate:", again.Duplicate, again.ID == first.ID)

	// Consumer: claim up to 10 (the delayed job is not due), work, complete.
	jobs, err := b.Claim(ctx, queue, &bus.ClaimOpts{Count: 10, Lease: time.Minute})
	if err != nil {
		panic(err)
	}
	for _, j := range jobs {
		fmt.Printf("%s (token %d)\n", j.Payload, j.Token)
		if err := b.Complete(ctx, j, nil); err != nil {
			panic(err)
		}
	}
	err = b.Complete(ctx, jobs[0], nil)
	fmt.Println("completing again is stale:", errors.Is(err, bus.ErrStale))

	counts, err := b.Counts(ctx, queue)
	if err != nil {
		panic(err)
	}
	fmt.Printf("pending %d, active %d, scheduled %d, dead %d\n", counts.Pending, counts.Active, counts.Scheduled, counts.Dead)
	// Output:
	// the second enqueue of order-42 is a duplicate: true true
	// {"to":"ada"} (token 1)
	// {"order":42} (token 1)
	// completing again is stale: true
	// pending 0, active 0, scheduled 1, dead 0
}

// A worker runs typed handlers by kind: it claims, runs, completes (or retries), renews its
// leases and waits on the queue's wake list by itself.
func ExampleWorker() {
	ctx := context.Background()
	b, queue, closeClient := exampleBus("emails")
	defer closeClient()

	type Email struct{ To string }
	completed := make(chan bus.JobEvent, 1)
	w, err := bus.NewWorker(b, bus.WorkerConfig{Queue: queue, Concurrency: 20, OnEvent: func(e bus.JobEvent) {
		if e.Type == bus.JobCompleted {
			completed <- e
		}
	}})
	if err != nil {
		panic(err)
	}
	bus.MustHandle(w, "email.send", func(ctx context.Context, t *bus.Task[Email]) error {
		fmt.Println("sending to", t.Args.To)
		return nil // nil completes; an error retries with backoff; bus.SkipRetry(err) sends to dead
	}, &bus.HandlerOpts{Timeout: 30 * time.Second})
	if err := w.Start(); err != nil {
		panic(err)
	}
	if _, err := bus.EnqueueTask(ctx, b, queue, "email.send", Email{To: "ada"}, nil); err != nil {
		panic(err)
	}
	select {
	case e := <-completed:
		fmt.Println(e.Type, e.Kind)
	case <-time.After(30 * time.Second):
		fmt.Println("timed out")
	}

	shutdown, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := w.Close(shutdown); err != nil { // stop claiming, finish or hand back running jobs
		panic(err)
	}
	s := w.Stats()
	fmt.Printf("claimed %d, completed %d, failed %d\n", s.Claimed, s.Completed, s.Failed)
	// Output:
	// sending to ada
	// completed email.send
	// claimed 1, completed 1, failed 0
}

// A failed job goes back to pending (or to schedule, after a backoff) until its attempts, the
// claims it had, reach the maximum; then it goes to dead.
func ExampleBus_Fail() {
	ctx := context.Background()
	b, queue, closeClient := exampleBus("payments")
	defer closeClient()

	if _, err := b.Enqueue(ctx, queue, []byte("charge 42"), nil); err != nil {
		panic(err)
	}
	for {
		jobs, err := b.Claim(ctx, queue, nil)
		if err != nil {
			panic(err)
		}
		if len(jobs) == 0 {
			break
		}
		// Backoff 0: claimable again at once; a worker waits DefaultBackoff(attempt).
		out, err := b.Fail(ctx, jobs[0], &bus.FailOpts{MaxAttempts: 3})
		if err != nil {
			panic(err)
		}
		fmt.Printf("attempt %d failed: %s\n", jobs[0].Token, out.State)
	}
	counts, err := b.Counts(ctx, queue)
	if err != nil {
		panic(err)
	}
	fmt.Printf("pending %d, dead %d\n", counts.Pending, counts.Dead)
	// Output:
	// attempt 1 failed: pending
	// attempt 2 failed: pending
	// attempt 3 failed: dead
	// pending 0, dead 1
}

// The operator's verbs: counts, browsing the dead set newest-first, one job's row and why it
// died, and bringing dead jobs back.
func ExampleBus_RetryDead() {
	ctx := context.Background()
	b, queue, closeClient := exampleBus("invoices")
	defer closeClient()

	// Two jobs that went to dead at once (MaxAttempts 1).
	for _, p := range []string{"invoice 1", "invoice 2"} {
		if _, err := b.Enqueue(ctx, queue, []byte(p), nil); err != nil {
			panic(err)
		}
		jobs, err := b.Claim(ctx, queue, nil)
		if err != nil {
			panic(err)
		}
		if _, err := b.Fail(ctx, jobs[0], &bus.FailOpts{MaxAttempts: 1, Error: "no such customer in " + p}); err != nil {
			panic(err)
		}
	}
	counts, err := b.Counts(ctx, queue)
	if err != nil {
		panic(err)
	}
	fmt.Printf("pending %d, dead %d\n", counts.Pending, counts.Dead)

	page, err := b.Browse(ctx, queue, &bus.BrowseOpts{Set: keys.Dead, Newest: true})
	if err != nil {
		panic(err)
	}
	for _, id := range page.IDs {
		info, err := b.Lookup(ctx, queue, id)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s: %s after %d attempt(s)\n", info.Payload, info.State, info.Attempts)
		for _, f := range info.Failures {
			fmt.Printf("  attempt %d: %s\n", f.Attempt, f.Error)
		}
	}

	n, err := b.RetryDead(ctx, queue, page.IDs...)
	if err != nil {
		panic(err)
	}
	counts, err = b.Counts(ctx, queue)
	if err != nil {
		panic(err)
	}
	fmt.Printf("retried %d: pending %d, dead %d\n", n, counts.Pending, counts.Dead)
	// Output:
	// pending 0, dead 2
	// invoice 2: dead after 1 attempt(s)
	//   attempt 1: no such customer in invoice 2
	// invoice 1: dead after 1 attempt(s)
	//   attempt 1: no such customer in invoice 1
	// retried 2: pending 2, dead 0
}
