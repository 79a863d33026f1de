package bus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/echocache/echocache/keys"
)

// The queue registry: emq:queues, one sorted set outside any hash tag, scored by the unix ms a
// queue was first seen (see keys.QueueRegistry). A Bus adds a queue with ZADD NX after its
// first successful write to it (enqueue, DeclarePeriodic, Pause, Resume, SetMaxAttempts) and
// a Worker when it starts and while it runs, once per Bus and name and minute (relistEvery):
// in between a write pays one lock-free map read. The minute is for an entry that went away
// while the queue is in use (DropQueue from another process, a forced failover to a replica
// that had not seen the ZADD): a producer that goes on writing to it, or a worker serving
// it, lists it again within a minute. A
// tool lists every queue, empty ones included, with one ZRANGE, on a cluster too (the set is
// in one slot; any node redirects to it).
//
// Why not a key per queue found by SCAN: listing 200 queues would walk every key of every
// primary (the job rows included, millions on a busy deployment) on every dashboard refresh;
// the registry answers with one read of one small set, and costs each Bus one ZADD per queue
// and minute of writing to it.

// registry is the Bus's memo of the names it has listed.
type registry struct {
	listed sync.Map      // queue name -> time.Time: when ZADD NX last succeeded
	size   atomic.Int64  // names in listed, bounded by maxCachedQueues
	every  time.Duration // relistEvery unless a test sets it (export_test.go)
}

// relistEvery is how long a Bus trusts that a name it listed is still in the registry.
const relistEvery = time.Minute

// QueueInfo is one queue of the registry.
type QueueInfo struct {
	Name string
	// FirstSeen is when a client first wrote to the queue, by that client's clock (the
	// registry's score).
	FirstSeen time.Time
}

// Queues lists every queue of the registry, sorted by name: the queues clients wrote to or
// started workers on, whether or not any of their keys remain (an emptied queue is listed).
// It is one ZRANGE of one set, on a standalone server or a cluster. Queues written only by
// clients that do not register them (older versions, raw scripts) are not listed; a queue
// stays listed until [Bus.DropQueue] deletes it (or an operator runs ZREM emq:queues <name>).
func (b *Bus) Queues(ctx context.Context) ([]QueueInfo, error) {
	const op = "queues"
	cmd := b.client.B().Zrange().Key(keys.QueueRegistry()).Min("0").Max("-1").Withscores().Build()
	entries, err := b.client.Do(ctx, cmd).AsZScores()
	if err != nil {
		return nil, fmt.Errorf("bus: %s: %w", op, translate(err))
	}
	out := make([]QueueInfo, 0, len(entries))
	for _, e := range entries {
		if keys.ValidateName(e.Member) != nil {
			return nil, protocolError(op, "%s holds %q, not a queue name", keys.QueueRegistry(), e.Member)
		}
		out = append(out, QueueInfo{Name: e.Member, FirstSeen: time.UnixMilli(int64(e.Score))})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// listAfter adds q to the registry when err says the write to it happened (nil, or an
// *AckError: the write reached the primary), and returns err. A ZADD that fails is not
// reported (the caller's write succeeded; failing it would invite a second write) and is
// tried again at the next write.
func (b *Bus) listAfter(ctx context.Context, q keys.Queue, err error) error {
	if err == nil || errors.Is(err, ErrNotDurable) {
		b.list(ctx, q.Name())
	}
	return err
}

// list adds name to the registry once per Bus and relistEvery; it reports whether the name
// is listed.
func (b *Bus) list(ctx context.Context, name string) error {
	now := time.Now()
	if at, ok := b.reg.listed.Load(name); ok && now.Sub(at.(time.Time)) < cmp.Or(b.reg.every, relistEvery) {
		return nil
	}
	cmd := b.client.B().Zadd().Key(keys.QueueRegistry()).Nx().ScoreMember().
		ScoreMember(float64(now.UnixMilli()), name).Build()
	if err := b.client.Do(ctx, cmd).Error(); err != nil {
		return fmt.Errorf("bus: listing queue %s in %s: %w", name, keys.QueueRegistry(), translate(err))
	}
	// Past the bound a name is sent again at each write: ZADD NX keeps its first score. A
	// name counts once however many writers listed it at the same time.
	if _, loaded := b.reg.listed.Swap(name, now); !loaded && b.reg.size.Add(1) > maxCachedQueues {
		b.reg.listed.Delete(name)
		b.reg.size.Add(-1)
	}
	return nil
}
