package bus_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
)

// TestDropQueue: a queue with jobs in every set, a kept result, an idempotency guard, lanes
// and their limits, a periodic schedule and settings is refused while a job is claimed, then
// dropped with Force: none of its keys remain, it leaves the registry, the claimed job's
// outcome is stale, and a neighbour queue is untouched. An enqueue afterwards makes it anew.
func TestDropQueue(t *testing.T) {
	t.Parallel()
	valkeytest.OnTargets(t, func(t *testing.T, tg valkeytest.Target) {
		ctx, c, b, name, _ := setup(t, tg, bus.Config{})
		neighbour := name + "-n"
		_, err := b.Enqueue(ctx, neighbour, []byte("stays"), nil)
		require.NoError(t, err)

		// Every kind of key the queue can have.
		_, err = b.EnqueueBatch(ctx, name, make([]bus.NewJob, 3000), nil)
		require.NoError(t, err)
		_, err = b.Enqueue(ctx, name, []byte("later"), &bus.EnqueueOpts{Delay: time.Hour})
		require.NoError(t, err)
		_, err = b.Enqueue(ctx, name, []byte("once"), &bus.EnqueueOpts{UniqueKey: "order-1"})
		require.NoError(t, err)
		jobs, err := b.Claim(ctx, name, &bus.ClaimOpts{Count: 3})
		require.NoError(t, err)
		_, err = b.Fail(ctx, jobs[0], &bus.FailOpts{MaxAttempts: 1, Error: "boom"})
		require.NoError(t, err)
		require.NoError(t, b.Complete(ctx, jobs[1], &bus.CompleteOpts{Result: []byte("ok"), ResultTTL: time.Hour}))
		running := jobs[2]
		_, err = b.Enqueue(ctx, name, []byte("tenant"), &bus.EnqueueOpts{Lane: "acme", Priority: 2})
		require.NoError(t, err)
		_, err = b.Enqueue(ctx, name, []byte("tenant"), &bus.EnqueueOpts{Lane: "acme"})
		require.NoError(t, err)
		require.NoError(t, b.SetLaneLimits(ctx, name, "acme", bus.LaneLimits{Cap: 2, Rate: bus.Rate{Limit: 100}}))
		require.NoError(t, b.DeclarePeriodic(ctx, name, bus.Periodic{Name: "nightly", Cron: "0 3 * * *", Kind: "report"}))
		require.NoError(t, b.SetDeadLimit(ctx, name, 100))
		require.NoError(t, b.Pause(ctx, name))
		tagged := "{" + name + "}"
		before := scanAll(t, c, tagged)
		require.Greater(t, len(before), 3000)

		// A claimed job refuses the drop: nothing is deleted.
		n, err := b.DropQueue(ctx, name, nil)
		require.ErrorIs(t, err, bus.ErrBusy)
		require.Zero(t, n)
		require.ElementsMatch(t, before, scanAll(t, c, tagged))

		n, err = b.DropQueue(ctx, name, &bus.DropOpts{Force: true})
		require.NoError(t, err)
		require.EqualValues(t, len(before), n, "every key of the queue, counted")
		require.Empty(t, scanAll(t, c, tagged), "no key of the queue remains")
		qs, err := b.Queues(ctx)
		require.NoError(t, err)
		require.NotContains(t, queueNames(qs), name)
		require.Contains(t, queueNames(qs), neighbour)
		counts, err := b.Counts(ctx, neighbour)
		require.NoError(t, err)
		require.EqualValues(t, 1, counts.Pending, "the neighbour keeps its job")

		// The running job's outcome finds no row.
		var stale *bus.StaleError
		require.ErrorAs(t, b.Complete(ctx, running, nil), &stale)

		// Dropping what is gone drops nothing; an enqueue makes the queue anew, listed again.
		n, err = b.DropQueue(ctx, name, nil)
		require.NoError(t, err)
		require.Zero(t, n)
		_, err = b.Enqueue(ctx, name, []byte("again"), nil)
		require.NoError(t, err)
		counts, err = b.Counts(ctx, name)
		require.NoError(t, err)
		require.EqualValues(t, 1, counts.Pending)
		require.False(t, counts.Paused)
		qs, err = b.Queues(ctx)
		require.NoError(t, err)
		require.Contains(t, queueNames(qs), name)

		_, err = b.DropQueue(ctx, "bad}name", nil)
		require.ErrorIs(t, err, bus.ErrInvalid)
	})
}

// queueNames are the names of qs.
func queueNames(qs []bus.QueueInfo) []string {
	out := make([]string, len(qs))
	for i, q := range qs {
		out[i] = q.Name
	}
	return out
}

// TestDropQueueTag: the walk deletes every key under the queue's tag, one outside the grammar's
// forms too, and nothing of a queue whose name starts with the same letters.
func TestDropQueueTag(t *testing.T) {
	t.Parallel()
	ctx, c, b, name, _ := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	_, err := b.EnqueueBatch(ctx, name, make([]bus.NewJob, 10), nil)
	require.NoError(t, err)
	require.NoError(t, c.Do(ctx, c.B().Set().Key("emq:{"+name+"}:stray").Value("x").Build()).Error())
	_, err = b.Enqueue(ctx, name+"x", []byte("other"), nil)
	require.NoError(t, err)
	n, err := b.DropQueue(ctx, name, nil)
	require.NoError(t, err)
	require.EqualValues(t, 13, n, "10 rows, pending, wake and the stray key")
	require.Empty(t, scanAll(t, c, "{"+name+"}"))
	require.Len(t, scanAll(t, c, "{"+name+"x}"), 3, "the other queue's row, pending and wake")
}

// TestDropByOtherBusRelists: a producer's Bus goes on writing to a queue another process
// dropped; it lists the queue again once its memo of the listing is older than relistEvery
// (a minute; 50 ms here). Its memo used to last for the process's life, and the live queue
// was missing from Queues until the producer restarted.
func TestDropByOtherBusRelists(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Shared(t)
	ctx := context.Background()
	producer, operator := newBus(t, srv.Client(t), bus.Config{}), newBus(t, srv.Client(t), bus.Config{})
	bus.SetRelistEvery(producer, 50*time.Millisecond)
	name := valkeytest.TestName(t)
	listed := func() bool {
		qs, err := operator.Queues(ctx)
		require.NoError(t, err)
		return slices.ContainsFunc(qs, func(q bus.QueueInfo) bool { return q.Name == name })
	}
	_, err := producer.Enqueue(ctx, name, []byte("x"), nil)
	require.NoError(t, err)
	require.True(t, listed())
	_, err = operator.DropQueue(ctx, name, nil)
	require.NoError(t, err)
	require.False(t, listed())
	time.Sleep(60 * time.Millisecond)
	_, err = producer.Enqueue(ctx, name, []byte("y"), nil)
	require.NoError(t, err)
	require.True(t, listed(), "the queue holds a job again: it is listed again")
}
