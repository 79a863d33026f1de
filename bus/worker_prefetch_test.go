package bus_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// TestWorkerPrefetchKill: a worker process with 2 slots and a prefetch buffer of 8 holds 10
// jobs (2 running, 8 leased and waiting in its buffer) when it is SIGKILLed. Another worker
// then runs every one of them: each buffered job only after its lease ran out (its deadline in
// active, read at the kill), under token 2; none is lost (every row retired, nothing left in
// any set) and none is completed twice. The two that were running run again (at-least-once)
// and are completed once too.
func TestWorkerPrefetchKill(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Shared(t)
	c := srv.Client(t)
	b := newBus(t, c, bus.Config{})
	ctx := context.Background()
	name := valkeytest.TestName(t)
	q := keys.MustQueue(name)
	const (
		lease    = time.Second
		held     = 10 // 2 slots + 8 buffered
		enqueued = 30
	)
	ids := enqueueTasks(t, b, name, "work", enqueued, "")
	a := startProc(t, srv.Addr, name, "a", lease, time.Hour, 2, true, envStarted+"=1", envPrefetch+"=8")
	valkeytest.Eventually(t, time.Minute, "worker a to hold 10 jobs", func() bool {
		cs, err := b.Counts(ctx, name)
		require.NoError(t, err)
		return cs.Active == held
	})
	startedBy := func() map[string]int64 {
		m, err := c.Do(ctx, c.B().Hgetall().Key(name+".started").Build()).AsIntMap()
		require.NoError(t, err)
		return m
	}
	valkeytest.Eventually(t, time.Minute, "worker a's 2 handlers to start", func() bool { return len(startedBy()) == 2 })
	a.kill(t)
	running := startedBy()
	active, err := c.Do(ctx, c.B().Zrange().Key(q.Active()).Min("0").Max("-1").Withscores().Build()).AsZScores()
	require.NoError(t, err)
	require.Len(t, active, held, "the killed worker's leases")
	deadlines := map[string]int64{} // the buffered jobs' lease deadlines, server ms
	for _, z := range active {
		if _, ok := running[z.Member]; !ok {
			deadlines[z.Member] = int64(z.Score)
		}
	}
	require.Len(t, deadlines, held-2, "8 jobs were claimed and buffered, their handlers never started")

	other := startProc(t, srv.Addr, name, "b", lease, 0, 10, true, envStarted+"=1")
	drained(t, b, name, time.Minute)
	other.stop(t)

	counts, err := b.Counts(ctx, name)
	require.NoError(t, err)
	require.Equal(t, bus.Counts{}, counts, "none lost: nothing pending, active, scheduled or dead")
	for _, id := range ids {
		require.Empty(t, row(t, c, q, id), "none lost: job %s is retired", id)
	}
	done, err := c.Do(ctx, c.B().Hgetall().Key(name+".done").Build()).AsIntMap()
	require.NoError(t, err)
	require.Len(t, done, enqueued)
	for _, id := range ids {
		require.Equal(t, int64(1), done[id.String()], "job %s completed once", id)
	}
	log, err := c.Do(ctx, c.B().Lrange().Key(name+".log.b").Start(0).Stop(-1).Build()).AsStrSlice()
	require.NoError(t, err)
	completedBy := map[string]string{} // id -> token, as worker b completed it
	for _, e := range log {
		if f := strings.Fields(e); f[0] == "completed" {
			completedBy[f[1]] = f[2]
		}
	}
	starts := startedBy()
	var late []time.Duration
	for id, deadline := range deadlines {
		require.Equal(t, "2", completedBy[id], "buffered job %s: run by the other worker under token 2", id)
		startedMs := starts[id] / 1000
		require.GreaterOrEqual(t, startedMs, deadline, "buffered job %s started before its lease ran out", id)
		late = append(late, time.Duration(startedMs-deadline)*time.Millisecond)
	}
	for id := range running {
		require.Equal(t, "2", completedBy[id], "running job %s: run again by the other worker under token 2", id)
	}
	t.Logf("worker a held %d jobs (2 running, %d buffered) when killed; worker b ran the buffered ones %v after their leases ran out; all %d completed once",
		held, len(deadlines), late, enqueued)
	require.NoError(t, c.Do(ctx, c.B().Del().Key(name+".done", name+".started", name+".log.a", name+".log.b").Build()).Error())
}
