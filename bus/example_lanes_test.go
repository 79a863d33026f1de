package bus_test

import (
	"context"
	"fmt"
	"time"

	"github.com/echocache/echocache/bus"
)

// Lanes shape one queue's work by a key the producer stamps on each job: a tenant's backlog
// does not starve a tenant that enqueued after it (the lanes take turns), a partner's lane holds
// at most one claimed job at a time, fleet-wide, and an urgent job is claimed before all of
// them. Claims of one job each show the order; a claim of more takes turns of up to 32 jobs a
// lane.
func ExampleBus_SetLaneLimits() {
	ctx := context.Background()
	b, queue, closeClient := exampleBus("settlement")
	defer closeClient()

	if err := b.SetLaneLimits(ctx, queue, "partner", bus.LaneLimits{Cap: 1}); err != nil {
		panic(err)
	}
	enqueue := func(lane string, n, priority int, name string) {
		batch := make([]bus.NewJob, n)
		for i := range batch {
			batch[i].Payload = []byte(fmt.Sprintf("%s-%d", name, i+1))
		}
		if _, err := b.EnqueueBatch(ctx, queue, batch, &bus.EnqueueOpts{Lane: lane, Priority: priority}); err != nil {
			panic(err)
		}
	}
	enqueue("acme", 1000, 0, "settle") // a large tenant's backlog
	enqueue("globex", 2, 0, "settle")  // a small tenant, after it
	enqueue("partner", 3, 0, "notify") // a partner API that takes one call at a time
	enqueue("acme", 1, 3, "reconcile") // urgent: priority 3 of 0 to 3

	var order []string
	var partnerJob bus.Job
	for range 8 {
		jobs, err := b.Claim(ctx, queue, &bus.ClaimOpts{Count: 1, Lease: time.Minute})
		if err != nil {
			panic(err)
		}
		j := jobs[0]
		order = append(order, fmt.Sprintf("%-8s %s", j.Lane, j.Payload))
		if j.Lane == "partner" {
			partnerJob = j
		}
	}
	for _, o := range order {
		fmt.Println(o)
	}

	_, lanes, err := b.Lanes(ctx, queue, "partner", "globex")
	if err != nil {
		panic(err)
	}
	for _, l := range lanes {
		fmt.Printf("%s: %d active, %d waiting, in the round robin: %t\n", l.Name, l.Active, l.Waiting, l.Ready)
	}

	// The partner's job completes: its slot is free, and the lane's next job can be claimed.
	if err := b.Complete(ctx, partnerJob, nil); err != nil {
		panic(err)
	}
	_, lanes, err = b.Lanes(ctx, queue, "partner")
	if err != nil {
		panic(err)
	}
	fmt.Printf("after the complete: %d active, in the round robin: %t\n", lanes[0].Active, lanes[0].Ready)
	// Output:
	// acme     reconcile-1
	// acme     settle-1
	// globex   settle-1
	// partner  notify-1
	// acme     settle-2
	// globex   settle-2
	// acme     settle-3
	// acme     settle-4
	// partner: 1 active, 2 waiting, in the round robin: false
	// globex: 2 active, 0 waiting, in the round robin: false
	// after the complete: 0 active, in the round robin: true
}
