package bus_test

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
)

// TestRetries: a job failed with a 100 ms backoff is not claimable before its run-at and is
// after it; with max attempts 3 it is claimed exactly 3 times and lands in dead; retry from dead
// brings it back with attempts kept; purge leaves no row.
func TestRetries(t *testing.T) {
	t.Parallel()
	valkeytest.OnTargets(t, func(t *testing.T, tg valkeytest.Target) {
		ctx, c, b, name, _ := setup(t, tg, bus.Config{})
		require.NoError(t, b.SetMaxAttempts(ctx, name, 3))

		enq, err := b.Enqueue(ctx, name, []byte("retry"), nil)
		require.NoError(t, err)
		jobs, err := b.Claim(ctx, name, nil)
		require.NoError(t, err)
		require.Len(t, jobs, 1)
		claims := 1

		// Attempt 1 fails with a 100 ms backoff. The fail and a claim go in one pipeline, so
		// the claim runs on the server right after the fail, well inside the backoff even on a
		// loaded machine, and must get nothing. These are the scripts the verbs run.
		q := keys.MustQueue(name)
		res := c.DoMulti(ctx,
			c.B().Eval().Script(lua.Get("fail").Source).Numkeys(6).
				Key(q.Active(), q.Schedule(), q.Pending(), q.Dead(), q.Meta(), q.Wake()).
				Arg(jobs[0].ID.String(), "1", "100", "0", strconv.Itoa(bus.DefaultMaxAttempts), "attempt 1").Build(),
			c.B().Eval().Script(lua.Get("claim").Source).Numkeys(4).
				Key(q.Pending(), q.Active(), q.Schedule(), q.Meta()).Arg("30000", "1", "100").Build())
		failed, err := res[0].ToArray()
		require.NoError(t, err)
		where, _ := failed[0].ToString()
		runAt, _ := failed[1].AsInt64()
		require.Equal(t, "scheduled", where)
		early, err := res[1].ToArray()
		require.NoError(t, err)
		require.Empty(t, early, "claimable right after the fail, before its run-at")

		// Through the Go API: each claim is bracketed by the server's clock; one that ran
		// wholly before the run-at gets nothing, the first one after it gets the job.
		for {
			before := serverMillis(t, c)
			jobs, err = b.Claim(ctx, name, nil)
			after := serverMillis(t, c)
			require.NoError(t, err)
			if after < runAt {
				require.Empty(t, jobs, "claimed before its run-at")
			}
			if len(jobs) == 1 {
				require.GreaterOrEqual(t, after, runAt, "claimed before its run-at")
				break
			}
			require.Less(t, before, runAt, "a claim that began after the run-at must get the job")
			time.Sleep(10 * time.Millisecond)
		}
		claims++
		require.Equal(t, int64(2), jobs[0].Token)

		// Fail until dead: the queue's maximum is 3 claims.
		var last bus.Outcome
		for {
			last, err = b.Fail(ctx, jobs[0], &bus.FailOpts{Backoff: time.Millisecond})
			require.NoError(t, err)
			if last.State == bus.StateDead {
				break
			}
			valkeytest.Eventually(t, 10*time.Second, "the retry to become claimable", func() bool {
				jobs, err = b.Claim(ctx, name, nil)
				require.NoError(t, err)
				return len(jobs) == 1
			})
			claims++
		}
		require.Equal(t, 3, claims, "claimed exactly max attempts times")
		counts, err := b.Counts(ctx, name)
		require.NoError(t, err)
		require.Equal(t, bus.Counts{Dead: 1, MaxAttempts: 3}, counts)
		jobs, err = b.Claim(ctx, name, nil)
		require.NoError(t, err)
		require.Empty(t, jobs, "a dead job is not claimable")

		n, err := b.RetryDead(ctx, name, enq.ID)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		info, err := b.Lookup(ctx, name, enq.ID)
		require.NoError(t, err)
		// The failure history is kept: one entry per failed attempt, the raw fail's text first.
		require.Len(t, info.Failures, 3)
		for i, want := range []string{"attempt 1", "", ""} {
			require.Equal(t, int64(i+1), info.Failures[i].Attempt)
			require.Equal(t, want, info.Failures[i].Error)
		}
		info.Failures = nil
		require.Equal(t, bus.JobInfo{ID: enq.ID, State: bus.StatePending, Attempts: 3, Payload: []byte("retry"), Set: keys.Pending}, info, "back in pending, attempts kept")

		// Kept attempts mean the next failure is final again.
		jobs, err = b.Claim(ctx, name, nil)
		require.NoError(t, err)
		require.Equal(t, int64(4), jobs[0].Token)
		last, err = b.Fail(ctx, jobs[0], nil)
		require.NoError(t, err)
		require.Equal(t, bus.StateDead, last.State)

		purged, err := b.PurgeDead(ctx, name, nil)
		require.NoError(t, err)
		require.Equal(t, []keys.JobID{enq.ID}, purged)
		require.Empty(t, scanAll(t, c, enq.ID.String()), "purge leaves no row")
		counts, err = b.Counts(ctx, name)
		require.NoError(t, err)
		require.Equal(t, bus.Counts{MaxAttempts: 3}, counts)
		_, err = b.Lookup(ctx, name, enq.ID)
		require.ErrorIs(t, err, bus.ErrNotFound)
	})
}

// TestConcurrentHousekeeping: 8 goroutines running reap and promote over 10,000 expired or due
// jobs move each job exactly once.
func TestConcurrentHousekeeping(t *testing.T) {
	t.Parallel()
	valkeytest.OnTargets(t, func(t *testing.T, tg valkeytest.Target) {
		ctx, c, b, name, q := setup(t, tg, bus.Config{})
		const half, batch = 5000, 500

		// 5,000 claimed with a 1 ms lease, then 5,000 scheduled 1 ms out: 20 round trips.
		leased := map[keys.JobID]bool{}
		for range half / batch {
			_, err := b.EnqueueBatch(ctx, name, payloads(batch, "l"), nil)
			require.NoError(t, err)
			jobs, err := b.Claim(ctx, name, &bus.ClaimOpts{Count: batch, Lease: time.Millisecond, PromoteLimit: -1})
			require.NoError(t, err)
			require.Len(t, jobs, batch)
			for _, j := range jobs {
				leased[j.ID] = true
			}
		}
		scheduled := map[keys.JobID]bool{}
		for range half / batch {
			out, err := b.EnqueueBatch(ctx, name, payloads(batch, "s"), &bus.EnqueueOpts{Delay: time.Millisecond})
			require.NoError(t, err)
			for _, e := range out {
				scheduled[e.ID] = true
			}
		}
		require.Len(t, leased, half)
		require.Len(t, scheduled, half)
		start := serverMillis(t, c)
		valkeytest.Eventually(t, 10*time.Second, "every lease and run-at to pass", func() bool { return serverMillis(t, c) > start+2 })

		const workers = 8
		var mu sync.Mutex
		moved := map[keys.JobID]int{}
		var requeued, promoted int
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for {
					r, err := b.Reap(ctx, name, &bus.ReapOpts{Limit: 50})
					if !assert.NoError(t, err) {
						return
					}
					p, err := b.Promote(ctx, name, &bus.PromoteOpts{Limit: 50})
					if !assert.NoError(t, err) {
						return
					}
					mu.Lock()
					for _, id := range append(r.Requeued, p...) {
						moved[id]++
					}
					requeued += len(r.Requeued)
					promoted += len(p)
					mu.Unlock()
					assert.Empty(t, r.Dead)
					if len(r.Requeued) == 0 && len(p) == 0 {
						return
					}
				}
			})
		}
		wg.Wait()
		require.False(t, t.Failed())

		require.Equal(t, half, requeued, "reaped exactly the 5,000 expired leases")
		require.Equal(t, half, promoted, "promoted exactly the 5,000 due jobs")
		require.Len(t, moved, 2*half)
		for id, n := range moved {
			require.Equal(t, 1, n, "job %s moved %d times", id, n)
			require.True(t, leased[id] || scheduled[id], "job %s was neither leased nor scheduled", id)
		}
		counts, err := b.Counts(ctx, name)
		require.NoError(t, err)
		require.Equal(t, bus.Counts{Pending: 2 * half}, counts)

		// Every row says pending, with attempts 1 for the reaped and 0 for the promoted.
		cmds := make(valkey.Commands, 0, len(moved))
		ids := make([]keys.JobID, 0, len(moved))
		for id := range moved {
			k, err := q.Job(id)
			require.NoError(t, err)
			cmds = append(cmds, c.B().Hmget().Key(k).Field("state", "attempts").Build())
			ids = append(ids, id)
		}
		for i, r := range c.DoMulti(ctx, cmds...) {
			f, err := r.AsStrSlice()
			require.NoError(t, err)
			want := "0"
			if leased[ids[i]] {
				want = "1"
			}
			require.Equal(t, []string{"pending", want}, f, ids[i].String())
		}
	})
}

// TestIdempotency: 100 concurrent enqueues with one key produce one job, and every caller gets
// its id; keys repeated inside a batch resolve to one job; a key answers again only after its
// TTL.
func TestIdempotency(t *testing.T) {
	t.Parallel()
	valkeytest.OnTargets(t, func(t *testing.T, tg valkeytest.Target) {
		ctx, c, b, name, q := setup(t, tg, bus.Config{})

		const callers = 100
		results := make([]bus.Enqueued, callers)
		var wg sync.WaitGroup
		for i := range callers {
			wg.Go(func() {
				var err error
				results[i], err = b.Enqueue(ctx, name, []byte("once"), &bus.EnqueueOpts{UniqueKey: "order-42"})
				assert.NoError(t, err)
			})
		}
		wg.Wait()
		require.False(t, t.Failed())
		created := 0
		for _, r := range results {
			require.Equal(t, results[0].ID, r.ID, "every caller gets the one job's id")
			if !r.Duplicate {
				created++
			}
		}
		require.Equal(t, 1, created, "exactly one enqueue added the job")
		counts, err := b.Counts(ctx, name)
		require.NoError(t, err)
		require.Equal(t, int64(1), counts.Pending)

		// In one batch: a key seen twice, a key already guarded, and a job without a key.
		out, err := b.EnqueueBatch(ctx, name, []bus.NewJob{
			{Payload: []byte("a"), UniqueKey: "k-a"},
			{Payload: []byte("a again"), UniqueKey: "k-a"},
			{Payload: []byte("old"), UniqueKey: "order-42"},
			{Payload: []byte("free")},
		}, nil)
		require.NoError(t, err)
		require.False(t, out[0].Duplicate)
		require.Equal(t, bus.Enqueued{ID: out[0].ID, Duplicate: true}, out[1])
		require.Equal(t, bus.Enqueued{ID: results[0].ID, Duplicate: true}, out[2])
		require.False(t, out[3].Duplicate)
		counts, err = b.Counts(ctx, name)
		require.NoError(t, err)
		require.Equal(t, int64(3), counts.Pending)

		// A short-lived key stops answering after its TTL (the server expires the guard).
		first, err := b.Enqueue(ctx, name, []byte("ttl"), &bus.EnqueueOpts{UniqueKey: "short", UniqueTTL: 50 * time.Millisecond})
		require.NoError(t, err)
		guard, err := q.Unique("short")
		require.NoError(t, err)
		valkeytest.Eventually(t, 10*time.Second, "the guard to expire", func() bool {
			n, err := c.Do(ctx, c.B().Exists().Key(guard).Build()).AsInt64()
			require.NoError(t, err)
			return n == 0
		})
		second, err := b.Enqueue(ctx, name, []byte("ttl"), &bus.EnqueueOpts{UniqueKey: "short"})
		require.NoError(t, err)
		require.False(t, second.Duplicate)
		require.NotEqual(t, first.ID, second.ID)
	})
}
