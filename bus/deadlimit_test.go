package bus_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
)

// TestDeadLimit: with SetDeadLimit(10), 30 jobs failed to dead leave the 10 newest in dead;
// the others are gone with their rows, failure histories and lane fields. A lower limit trims
// at the next death, 0 keeps every dead job again, and Counts reads the limit.
func TestDeadLimit(t *testing.T) {
	t.Parallel()
	valkeytest.OnTargets(t, func(t *testing.T, tg valkeytest.Target) {
		ctx, c, b, name, q := setup(t, tg, bus.Config{})
		require.NoError(t, b.SetDeadLimit(ctx, name, 10))
		counts, err := b.Counts(ctx, name)
		require.NoError(t, err)
		require.Equal(t, 10, counts.DeadLimit)

		// 15 jobs without a lane, then 15 in lane acme: the newest 10 have lanes.
		var ids []keys.JobID
		for _, opts := range []*bus.EnqueueOpts{nil, {Lane: "acme"}} {
			got, err := b.EnqueueBatch(ctx, name, make([]bus.NewJob, 15), opts)
			require.NoError(t, err)
			for _, e := range got {
				ids = append(ids, e.ID)
			}
		}
		failAll := func(n int) []keys.JobID {
			jobs, err := b.Claim(ctx, name, &bus.ClaimOpts{Count: n})
			require.NoError(t, err)
			require.Len(t, jobs, n)
			var failed []keys.JobID
			for _, j := range jobs {
				out, err := b.Fail(ctx, j, &bus.FailOpts{MaxAttempts: 1, Error: "boom"})
				require.NoError(t, err)
				require.Equal(t, bus.StateDead, out.State)
				failed = append(failed, j.ID)
			}
			return failed
		}
		failAll(30)
		requireDead(t, b, name, ids[20:])
		newest := ids[28:]
		for _, id := range ids[:20] {
			_, err := b.Lookup(ctx, name, id)
			require.ErrorIs(t, err, bus.ErrNotFound, "a trimmed job's row is gone")
			ek, err := q.Errors(id)
			require.NoError(t, err)
			n, err := c.Do(ctx, c.B().Exists().Key(ek).Build()).AsInt64()
			require.NoError(t, err)
			require.Zero(t, n, "a trimmed job's failure history is gone")
		}
		for _, id := range ids[20:] {
			info, err := b.Lookup(ctx, name, id)
			require.NoError(t, err)
			require.Equal(t, "acme", info.Lane)
			require.Len(t, info.Failures, 1)
		}
		fields, err := c.Do(ctx, c.B().Hlen().Key(q.JobLane()).Build()).AsInt64()
		require.NoError(t, err)
		require.EqualValues(t, 10, fields, "the trimmed jobs' lane fields went with their rows")

		// A lower limit trims at the next death, keeping the job that died.
		require.NoError(t, b.SetDeadLimit(ctx, name, 3))
		late := enqueueTasks(t, b, name, "x", 1, "")
		failAll(1)
		requireDead(t, b, name, append(newest, late...))

		// 0: every dead job is kept again.
		require.NoError(t, b.SetDeadLimit(ctx, name, 0))
		enqueueTasks(t, b, name, "x", 5, "")
		failAll(5)
		counts, err = b.Counts(ctx, name)
		require.NoError(t, err)
		require.EqualValues(t, 8, counts.Dead)
		require.Zero(t, counts.DeadLimit)

		// Bad input is refused before any round trip: nothing written.
		require.ErrorIs(t, b.SetDeadLimit(ctx, name, -1), bus.ErrInvalid)
		require.ErrorIs(t, b.SetDeadLimit(ctx, name, lua.MaxUint+1), bus.ErrInvalid)
		require.ErrorIs(t, b.SetMaxAttempts(ctx, name, lua.MaxUint+1), bus.ErrInvalid)
		counts, err = b.Counts(ctx, name)
		require.NoError(t, err)
		require.Zero(t, counts.DeadLimit)
	})
}

// TestDeadLimitWorker: a worker whose handler always fails, on a queue that keeps 5 dead
// jobs: after 40 jobs, dead holds the 5 newest, and a lease that ran out on the last attempt
// (reap) trims too.
func TestDeadLimitWorker(t *testing.T) {
	t.Parallel()
	ctx, _, b, name, _ := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	require.NoError(t, b.SetMaxAttempts(ctx, name, 1))
	require.NoError(t, b.SetDeadLimit(ctx, name, 5))
	ids := enqueueTasks(t, b, name, "fails", 40, "")
	var died atomic.Int64
	done := make(chan struct{})
	w, err := bus.NewWorker(b, bus.WorkerConfig{Queue: name, Concurrency: 4, Logger: quiet, OnEvent: func(e bus.JobEvent) {
		if e.Type == bus.JobDead && died.Add(1) == 40 {
			close(done)
		}
	}})
	require.NoError(t, err)
	bus.MustHandle(w, "fails", func(context.Context, *bus.Task[args]) error { return errors.New("always") }, nil)
	require.NoError(t, w.Start())
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%d of 40 jobs died in 30 s", died.Load())
	}
	require.NoError(t, w.Close(ctx))
	requireDead(t, b, name, ids[35:])

	// A lease that runs out on the last attempt: reap sends the job to dead and trims.
	late := enqueueTasks(t, b, name, "x", 1, "")
	_, err = b.Claim(ctx, name, &bus.ClaimOpts{Lease: 20 * time.Millisecond})
	require.NoError(t, err)
	time.Sleep(50 * time.Millisecond)
	moved, err := b.Reap(ctx, name, nil)
	require.NoError(t, err)
	require.Equal(t, late, moved.Dead)
	requireDead(t, b, name, append(append([]keys.JobID(nil), ids[36:]...), late...))
}

// requireDead requires queue's dead set to hold exactly want, in mint order.
func requireDead(t *testing.T, b *bus.Bus, queue string, want []keys.JobID) {
	t.Helper()
	page, err := b.Browse(context.Background(), queue, &bus.BrowseOpts{Set: keys.Dead, Limit: 1000})
	require.NoError(t, err)
	require.Equal(t, want, page.IDs)
}
