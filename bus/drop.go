package bus

import (
	"context"
	"fmt"
	"strconv"

	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
)

// dropCount is SCAN's COUNT for each drop call: how many keys one call looks at.
const dropCount = 1000

// DropOpts are the options of [Bus.DropQueue]. A nil *DropOpts is the zero value.
type DropOpts struct {
	// Force drops a queue whose active set holds jobs. Their handlers run on; their outcomes
	// then answer a *[StaleError] (no row). Default false: such a queue answers [ErrBusy].
	Force bool
}

// DropQueue deletes queue for good: every job in every set with its row, failure history,
// result and idempotency guard, its meta (pause, max attempts, dead limit), its lanes and
// their limits, its periodic schedules and its workers' published stats; then it removes the
// name from the queue registry. It returns how many keys it deleted. A queue with claimed jobs
// answers [ErrBusy] before anything is deleted, unless opts.Force (a walk that a failover
// starts again checks again, and may answer ErrBusy with some keys deleted).
//
// It walks the queue's keys a SCAN step (dropCount keys) per script call, so a large queue
// does not stall the server, and the walk resumes across a failover (it starts again). Keys
// written meanwhile may survive it: stop the queue's producers, workers and schedulers first
// (a worker that still runs lists the queue again and keeps its stats; an enqueue creates it
// anew). A queue that does not exist drops nothing and is not an error.
func (b *Bus) DropQueue(ctx context.Context, queue string, opts *DropOpts) (int64, error) {
	const op = "drop"
	q, err := b.queue(op, queue)
	if err != nil {
		return 0, err
	}
	force := "0"
	if opts != nil && opts.Force {
		force = "1"
	}
	var deleted int64
	cursor, server := "0", ""
	for {
		args := []string{cursor, strconv.Itoa(dropCount), force}
		if server != "" {
			args = append(args, server)
		}
		msg, err := b.exec(ctx, lua.Run{Script: scDrop, Keys: keysOf(scDrop, q), Args: args}, nil)
		if err != nil {
			return deleted, errorFor(call{op: op, queue: queue}, err)
		}
		arr, err := msg.ToArray()
		if err != nil || len(arr) != 3 {
			return deleted, protocolError(op, "reply %v", msg)
		}
		n, err1 := arr[1].AsInt64()
		next, err2 := arr[0].ToString()
		srv, err3 := arr[2].ToString()
		if err1 != nil || err2 != nil || err3 != nil {
			return deleted, protocolError(op, "reply %v", msg)
		}
		deleted += n
		if next == "0" {
			break
		}
		cursor, server = next, srv
	}
	if err := b.client.Do(ctx, b.client.B().Zrem().Key(keys.QueueRegistry()).Member(queue).Build()).Error(); err != nil {
		return deleted, fmt.Errorf("bus: %s: removing queue %s from %s: %w", op, queue, keys.QueueRegistry(), translate(err))
	}
	if _, loaded := b.reg.listed.LoadAndDelete(queue); loaded {
		b.reg.size.Add(-1)
	}
	b.noteFlow(queue, false)
	return deleted, nil
}
