package bus_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// TestJobResults: a kind with a ResultTTL keeps what its handler passes to SetResult: Lookup
// answers it (StateRetired, the completing token, the completion time) until the TTL, and
// nothing after it; a kind without one keeps nothing (SetResult refuses), and a failed
// attempt's result is dropped.
func TestJobResults(t *testing.T) {
	t.Parallel()
	valkeytest.OnTargets(t, func(t *testing.T, tg valkeytest.Target) {
		ctx, c, b, name, q := setup(t, tg, bus.Config{})
		const ttl = 3 * time.Second // long enough to be read on a loaded machine, short enough to wait for
		refused := make(chan error, 1)
		startWorker(t, b, bus.WorkerConfig{Queue: name, Backoff: func(int64) time.Duration { return 0 }}, func(w *bus.Worker) {
			bus.MustHandle(w, "sum", func(ctx context.Context, task *bus.Task[args]) error {
				if err := bus.SetResult(ctx, []byte("attempt "+string(rune('0'+task.Job.Token)))); err != nil {
					return err
				}
				if task.Args.Mode == "flaky" && task.Job.Token == 1 {
					return errors.New("flaky") // this attempt's result is dropped
				}
				return nil
			}, &bus.HandlerOpts{ResultTTL: ttl})
			bus.MustHandle(w, "plain", func(ctx context.Context, task *bus.Task[args]) error {
				refused <- bus.SetResult(ctx, []byte("x"))
				return nil
			}, nil)
		})
		before := serverMillis(t, c)
		steady := enqueueTasks(t, b, name, "sum", 1, "")[0]
		flaky := enqueueTasks(t, b, name, "sum", 1, "flaky")[0]
		plain := enqueueTasks(t, b, name, "plain", 1, "")[0]
		drained(t, b, name, 30*time.Second)

		err := <-refused
		require.ErrorIs(t, err, bus.ErrInvalid, "a kind without ResultTTL keeps no result")
		valkeytest.Eventually(t, 10*time.Second, "the plain job to be retired", func() bool {
			_, err := b.Lookup(ctx, name, plain)
			return errors.Is(err, bus.ErrNotFound)
		})
		require.Empty(t, scanAll(t, c, plain.String()), "without the option nothing remains")

		for id, want := range map[keys.JobID]bus.JobInfo{
			steady: {State: bus.StateRetired, Attempts: 1, Result: []byte("attempt 1")},
			flaky:  {State: bus.StateRetired, Attempts: 2, Result: []byte("attempt 2")},
		} {
			var info bus.JobInfo
			valkeytest.Eventually(t, 10*time.Second, "the result", func() bool {
				info, err = b.Lookup(ctx, name, id)
				return err == nil && info.State == bus.StateRetired
			})
			require.GreaterOrEqual(t, info.At.UnixMilli(), before)
			require.LessOrEqual(t, info.At.UnixMilli(), serverMillis(t, c))
			want.ID, want.At = id, info.At
			require.Equal(t, want, info)
			rk, err := q.Result(id)
			require.NoError(t, err)
			require.Equal(t, []string{rk}, scanAll(t, c, id.String()), "the result alone remains: no row, no history")
		}

		// Readable until its TTL, gone after it.
		info, err := b.Lookup(ctx, name, steady)
		require.NoError(t, err)
		valkeytest.Eventually(t, 10*time.Second, "the result to expire", func() bool {
			_, err := b.Lookup(ctx, name, steady)
			return errors.Is(err, bus.ErrNotFound)
		})
		gone := serverMillis(t, c)
		require.GreaterOrEqual(t, gone, info.At.Add(ttl).UnixMilli()-5, "kept for its TTL")
		require.Empty(t, scanAll(t, c, steady.String()))
	})
}

// TestCompleteResult: Bus.Complete keeps a result only when asked; the options are checked
// before any round trip.
func TestCompleteResult(t *testing.T) {
	t.Parallel()
	ctx, c, b, name, q := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	_, err := b.EnqueueBatch(ctx, name, payloads(2, "r"), nil)
	require.NoError(t, err)
	jobs, err := b.Claim(ctx, name, &bus.ClaimOpts{Count: 2})
	require.NoError(t, err)
	require.Len(t, jobs, 2)
	j := jobs[0]
	for what, o := range map[string]*bus.CompleteOpts{
		"a negative TTL":         {Result: []byte("r"), ResultTTL: -time.Second},
		"a result without a TTL": {Result: []byte("r")},
	} {
		require.ErrorIs(t, b.Complete(ctx, j, o), bus.ErrInvalid, what)
	}
	require.ErrorIs(t, b.Complete(ctx, j, &bus.CompleteOpts{Result: []byte(strings.Repeat("r", bus.MaxResultSize+1)), ResultTTL: time.Minute}), bus.ErrTooLarge)
	_, err = b.CompleteMany(ctx, jobs, &bus.CompleteOpts{Result: []byte("r"), ResultTTL: time.Minute})
	require.ErrorIs(t, err, bus.ErrInvalid, "completemany keeps no results")
	require.Equal(t, "active", row(t, c, q, j.ID)["state"], "nothing was written")

	big := []byte(strings.Repeat("r", bus.MaxResultSize))
	require.NoError(t, b.Complete(ctx, j, &bus.CompleteOpts{Result: big, ResultTTL: time.Minute}))
	info, err := b.Lookup(ctx, name, j.ID)
	require.NoError(t, err)
	require.Equal(t, bus.StateRetired, info.State)
	require.Equal(t, big, info.Result)
	rk, err := q.Result(j.ID)
	require.NoError(t, err)
	pttl, err := c.Do(ctx, c.B().Pttl().Key(rk).Build()).AsInt64()
	require.NoError(t, err)
	require.Greater(t, pttl, int64(50_000))
	require.LessOrEqual(t, pttl, int64(60_000))

	require.NoError(t, b.Complete(ctx, jobs[1], &bus.CompleteOpts{ResultTTL: time.Minute}), "an empty result is a result")
	info, err = b.Lookup(ctx, name, jobs[1].ID)
	require.NoError(t, err)
	require.Equal(t, bus.StateRetired, info.State)
	require.Equal(t, []byte{}, info.Result)
}

// TestRecordResult: outside a worker, RecordResult lets a handler's SetResult be read back;
// SetResult refuses a context without a slot, a result over MaxResultSize, and a call after
// the recording ended.
func TestRecordResult(t *testing.T) {
	t.Parallel()
	require.ErrorIs(t, bus.SetResult(context.Background(), []byte("x")), bus.ErrInvalid)
	ctx, result := bus.RecordResult(context.Background())
	require.ErrorIs(t, bus.SetResult(ctx, make([]byte, bus.MaxResultSize+1)), bus.ErrTooLarge)
	buf := []byte("first")
	require.NoError(t, bus.SetResult(ctx, buf))
	buf[0] = 'F'
	got, ok := result()
	require.True(t, ok)
	require.Equal(t, []byte("first"), got, "SetResult copied it")
	require.ErrorIs(t, bus.SetResult(ctx, []byte("late")), bus.ErrInvalid, "after the recording ended")
	got, _ = result()
	require.Equal(t, []byte("first"), got)

	ctx, result = bus.RecordResult(context.Background())
	require.NoError(t, bus.SetResult(ctx, []byte("one")))
	require.NoError(t, bus.SetResult(ctx, []byte("two")))
	got, _ = result()
	require.Equal(t, []byte("two"), got, "a later call replaces the result")
	_, none := bus.RecordResult(context.Background())
	_, ok = none()
	require.False(t, ok)
}

// TestWorkerResultsInTheStream: jobs that keep a result and jobs that keep none, interleaved in
// one stream that a worker drains with its pipelined loop (the plain jobs' completes ride with
// its claims in completeclaim): every result job is retired keeping its own result, and every
// plain job leaves nothing.
func TestWorkerResultsInTheStream(t *testing.T) {
	t.Parallel()
	ctx, c, b, name, _ := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	w := startWorker(t, b, bus.WorkerConfig{Queue: name, Concurrency: 8, Prefetch: 8}, func(w *bus.Worker) {
		bus.MustHandle(w, "sum", func(ctx context.Context, task *bus.Task[args]) error {
			return bus.SetResult(ctx, []byte(strconv.Itoa(2*task.Args.N)))
		}, &bus.HandlerOpts{ResultTTL: time.Minute})
		bus.MustHandle(w, "plain", func(context.Context, *bus.Task[args]) error { return nil }, nil)
	})
	const n = 200
	jobs := make([]bus.NewJob, n)
	for i := range jobs {
		kind := "plain"
		if i%2 == 0 {
			kind = "sum"
		}
		p, err := bus.EncodeTask(kind, args{N: i}, nil)
		require.NoError(t, err)
		jobs[i].Payload = p
	}
	out, err := b.EnqueueBatch(ctx, name, jobs, nil)
	require.NoError(t, err)
	drained(t, b, name, time.Minute)
	valkeytest.Eventually(t, 10*time.Second, "every job to be completed", func() bool { return w.Stats().Completed == n })
	for i, e := range out {
		info, err := b.Lookup(ctx, name, e.ID)
		if i%2 == 1 {
			require.ErrorIs(t, err, bus.ErrNotFound, "job %d keeps nothing", i)
			require.Empty(t, scanAll(t, c, e.ID.String()))
			continue
		}
		require.NoError(t, err, "job %d", i)
		require.Equal(t, bus.StateRetired, info.State)
		require.Equal(t, []byte(strconv.Itoa(2*i)), info.Result, "job %d keeps its own result", i)
	}
	require.Zero(t, w.Stats().Stale)
}
