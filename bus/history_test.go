package bus_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// TestFailureHistory: a job whose handler fails three times with three different errors shows
// all three in Lookup (attempt, server time, text), oldest first, while its row keeps exactly
// three fields; a job that failed twice and then succeeded leaves nothing once retired, and
// the dead job leaves nothing once purged (SCAN of the queue's tag, on every node).
func TestFailureHistory(t *testing.T) {
	t.Parallel()
	valkeytest.OnTargets(t, func(t *testing.T, tg valkeytest.Target) {
		ctx, c, b, name, q := setup(t, tg, bus.Config{})
		errs := []string{"connection refused", "timeout after 5s", "bad \u00e9ncoding"}
		w := startWorker(t, b, bus.WorkerConfig{
			Queue: name, MaxAttempts: 3, Backoff: func(int64) time.Duration { return 0 },
		}, func(w *bus.Worker) {
			bus.MustHandle(w, "failing", func(ctx context.Context, task *bus.Task[args]) error {
				if task.Args.Mode == "recover" && task.Job.Token == 3 {
					return nil
				}
				if int(task.Job.Token) > len(errs) {
					return errors.New("still failing")
				}
				return errors.New(errs[task.Job.Token-1])
			}, nil)
		})
		before := serverMillis(t, c)
		dead := enqueueTasks(t, b, name, "failing", 1, "die")[0]
		retired := enqueueTasks(t, b, name, "failing", 1, "recover")[0]
		counts := drained(t, b, name, 30*time.Second)
		require.Equal(t, int64(1), counts.Dead)
		valkeytest.Eventually(t, 10*time.Second, "the outcomes", func() bool { s := w.Stats(); return s.Dead == 1 && s.Completed == 1 })
		after := serverMillis(t, c)

		info, err := b.Lookup(ctx, name, dead)
		require.NoError(t, err)
		require.Equal(t, bus.StateDead, info.State)
		require.Len(t, info.Failures, 3)
		last := before
		for i, f := range info.Failures {
			require.Equal(t, int64(i+1), f.Attempt)
			require.Equal(t, errs[i], f.Error)
			require.GreaterOrEqual(t, f.At.UnixMilli(), last, "oldest first, on the server's clock")
			require.LessOrEqual(t, f.At.UnixMilli(), after)
			last = f.At.UnixMilli()
		}
		require.Len(t, row(t, c, q, dead), 3, "the row stays three fields")

		// The retired job: nothing of it remains, its history included.
		require.Empty(t, scanAll(t, c, retired.String()), "a retired job leaves nothing")
		_, err = b.Lookup(ctx, name, retired)
		require.ErrorIs(t, err, bus.ErrNotFound)

		// Retry keeps the history; purge deletes it.
		n, err := b.RetryDead(ctx, name, dead)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		counts = drained(t, b, name, 30*time.Second)
		require.Equal(t, int64(1), counts.Dead, "the retried job dies again at once: attempts are kept")
		info, err = b.Lookup(ctx, name, dead)
		require.NoError(t, err)
		require.Len(t, info.Failures, 4, "the retry's failure joins the three")
		require.Equal(t, bus.Failure{Attempt: 4, At: info.Failures[3].At, Error: "still failing"}, info.Failures[3])
		_, err = b.PurgeDead(ctx, name, &bus.PurgeOpts{IDs: []keys.JobID{dead}})
		require.NoError(t, err)
		require.Empty(t, scanAll(t, c, dead.String()), "a purged job leaves nothing")
	})
}

// TestFailureHistoryBounds: Bus.Fail records FailOpts.Error cut to MaxFailureText bytes on a
// UTF-8 boundary; a lease that ran out is recorded as LeaseExpired; the history keeps the
// last MaxFailures attempts.
func TestFailureHistoryBounds(t *testing.T) {
	t.Parallel()
	ctx, _, b, name, _ := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	enq, err := b.Enqueue(ctx, name, []byte("x"), nil)
	require.NoError(t, err)
	claim := func() bus.Job {
		t.Helper()
		jobs, err := b.Claim(ctx, name, &bus.ClaimOpts{Lease: time.Minute})
		require.NoError(t, err)
		require.Len(t, jobs, 1)
		return jobs[0]
	}
	// 1023 ASCII bytes and a 3-byte rune: the rune would straddle the limit, so it goes.
	long := strings.Repeat("a", bus.MaxFailureText-1) + "\u20ac" + "tail"
	_, err = b.Fail(ctx, claim(), &bus.FailOpts{Error: long})
	require.NoError(t, err)
	info, err := b.Lookup(ctx, name, enq.ID)
	require.NoError(t, err)
	require.Len(t, info.Failures, 1)
	require.Equal(t, strings.Repeat("a", bus.MaxFailureText-1), info.Failures[0].Error)

	// A lease that runs out: reap records it.
	jobs, err := b.Claim(ctx, name, &bus.ClaimOpts{Lease: time.Millisecond})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	valkeytest.Eventually(t, 10*time.Second, "the lease to be reaped", func() bool {
		r, err := b.Reap(ctx, name, nil)
		require.NoError(t, err)
		return len(r.Requeued) == 1
	})
	info, err = b.Lookup(ctx, name, enq.ID)
	require.NoError(t, err)
	require.Len(t, info.Failures, 2)
	require.Equal(t, bus.Failure{Attempt: 2, At: info.Failures[1].At, Error: bus.LeaseExpired}, info.Failures[1])

	// Twelve failures in all: the last ten are kept.
	for range 10 {
		_, err = b.Fail(ctx, claim(), &bus.FailOpts{Error: "again"})
		require.NoError(t, err)
	}
	info, err = b.Lookup(ctx, name, enq.ID)
	require.NoError(t, err)
	require.Len(t, info.Failures, bus.MaxFailures)
	require.Equal(t, int64(3), info.Failures[0].Attempt, "attempts 1 and 2 fell off")
	require.Equal(t, int64(12), info.Failures[bus.MaxFailures-1].Attempt)
}
