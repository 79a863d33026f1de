package bus_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// fresh is a queue name no earlier run of the test used (the registry outlives a run, and
// -count runs a test again in one process).
func fresh(t *testing.T) string {
	t.Helper()
	id := keys.NewJobID().String()
	suffix := "." + id[len(id)-8:]
	base := valkeytest.TestName(t)
	return base[:min(len(base), keys.MaxNameLen-len(suffix)-16)] + suffix // room for the test's own suffixes
}

// listed is the registry's entry for name, if any.
func listed(t *testing.T, ctx context.Context, b *bus.Bus, name string) (bus.QueueInfo, bool) {
	t.Helper()
	qs, err := b.Queues(ctx)
	require.NoError(t, err)
	for i, q := range qs {
		if i > 0 {
			require.Less(t, qs[i-1].Name, q.Name, "Queues is sorted by name")
		}
		if q.Name == name {
			return q, true
		}
	}
	return bus.QueueInfo{}, false
}

// emptied enqueues one job on name, claims and completes it: the queue has no key left.
func emptied(t *testing.T, ctx context.Context, c valkey.Client, b *bus.Bus, name string) {
	t.Helper()
	_, err := b.Enqueue(ctx, name, []byte("x"), nil)
	require.NoError(t, err)
	jobs, err := b.Claim(ctx, name, nil)
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.NoError(t, b.Complete(ctx, jobs[0], nil))
	require.NoError(t, c.Do(ctx, c.B().Del().Key(keys.MustQueue(name).Wake()).Build()).Error())
	require.Empty(t, scanAll(t, c, "{"+name+"}"), "the queue %s has no key left", name)
}

// TestQueueRegistry: the verbs that write to a queue list it once, with the time it was first
// seen; an emptied queue stays listed; a refused write lists nothing; a second process keeps
// the first-seen time (ZADD NX); a Bus sends its ZADD once per name.
func TestQueueRegistry(t *testing.T) {
	t.Parallel()
	valkeytest.OnTargets(t, func(t *testing.T, tg valkeytest.Target) {
		ctx, c, b, _, _ := setup(t, tg, bus.Config{})
		name := fresh(t)
		before := time.Now().Add(-time.Millisecond)
		emptied(t, ctx, c, b, name)
		info, ok := listed(t, ctx, b, name)
		require.True(t, ok, "an emptied queue is listed")
		require.WithinRange(t, info.FirstSeen, before, time.Now())

		for verb, write := range map[string]func(q string) error{
			"pause":  func(q string) error { return b.Pause(ctx, q) },
			"resume": func(q string) error { return b.Resume(ctx, q) },
			"configure": func(q string) error {
				if err := b.SetMaxAttempts(ctx, q, 3); err != nil {
					return err
				}
				return b.SetMaxAttempts(ctx, q, 0) // meta deleted again: no key remains
			},
			"declare periodic": func(q string) error {
				return b.DeclarePeriodic(ctx, q, bus.Periodic{Name: "tick", Every: time.Hour, Payload: []byte("x")})
			},
		} {
			q := name + "." + strings.ReplaceAll(verb, " ", "-")
			_, ok := listed(t, ctx, b, q)
			require.False(t, ok, verb)
			require.NoError(t, write(q), verb)
			_, ok = listed(t, ctx, b, q)
			require.True(t, ok, "%s lists the queue", verb)
		}

		refused := name + ".refused"
		_, err := b.Enqueue(ctx, refused, make([]byte, bus.DefaultMaxPayload+1), nil)
		require.ErrorIs(t, err, bus.ErrTooLarge)
		_, ok = listed(t, ctx, b, refused)
		require.False(t, ok, "a refused write lists nothing")

		// Another process: its ZADD NX keeps the first-seen time.
		other := newBus(t, c, bus.Config{})
		time.Sleep(2 * time.Millisecond)
		_, err = other.Enqueue(ctx, name, []byte("y"), nil)
		require.NoError(t, err)
		again, _ := listed(t, ctx, other, name)
		require.Equal(t, info.FirstSeen, again.FirstSeen)

		// Once per Bus and name: with the entry removed by hand, b does not send it again,
		// and a new Bus (a new process) does.
		require.NoError(t, c.Do(ctx, c.B().Zrem().Key(keys.QueueRegistry()).Member(name).Build()).Error())
		_, err = b.Enqueue(ctx, name, []byte("z"), nil)
		require.NoError(t, err)
		_, ok = listed(t, ctx, b, name)
		require.False(t, ok, "the Bus listed the name once and pays nothing more")
		_, err = newBus(t, c, bus.Config{}).Enqueue(ctx, name, []byte("z"), nil)
		require.NoError(t, err)
		_, ok = listed(t, ctx, b, name)
		require.True(t, ok)
	})
}

// TestQueueRegistryAcrossPrimaries: on the loopback cluster, queues whose slots live on each
// of the three primaries are emptied, and one Queues call (one ZRANGE on the registry's slot)
// lists all of them, from a client of any node.
func TestQueueRegistryAcrossPrimaries(t *testing.T) {
	t.Parallel()
	cl := valkeytest.SharedCluster(t)
	c := cl.Client(t)
	b := newBus(t, c, bus.Config{})
	ctx := context.Background()
	base := valkeytest.TestName(t)
	var names []string
	for _, p := range cl.Primaries() {
		name := queueOn(t, cl, base, p)
		names = append(names, name)
		_, err := b.Enqueue(ctx, name, []byte("x"), nil)
		require.NoError(t, err)
		pc := p.Client(t)
		n, err := pc.Do(ctx, pc.B().Exists().Key(keys.MustQueue(name).Pending()).Build()).AsInt64()
		require.NoError(t, err)
		require.Equal(t, int64(1), n, "%s lives on %s", name, p.Addr)
	}
	for _, name := range names {
		jobs, err := b.Claim(ctx, name, nil)
		require.NoError(t, err)
		require.NoError(t, b.Complete(ctx, jobs[0], nil))
		require.NoError(t, c.Do(ctx, c.B().Del().Key(keys.MustQueue(name).Wake()).Build()).Error())
		require.Empty(t, scanAll(t, c, "{"+name+"}"))
	}
	// The registry is one key in one slot: its primary holds it, the others redirect there.
	owner := cl.PrimaryForSlot(keys.Slot(keys.QueueRegistry()))
	for _, p := range cl.Primaries() {
		pc := p.Client(t)
		n, err := pc.Do(ctx, pc.B().Exists().Key(keys.QueueRegistry()).Build()).AsInt64()
		if p == owner {
			require.NoError(t, err)
			require.Equal(t, int64(1), n)
			continue
		}
		ve, ok := valkey.IsValkeyErr(err)
		require.True(t, ok, "%v", err)
		addr, moved := ve.IsMoved()
		require.True(t, moved, "%v", err)
		require.Equal(t, owner.Addr, addr)
	}
	for _, p := range cl.Primaries() {
		// A Bus whose client was seeded with this node only still reads the whole registry.
		nc := cl.ClientWith(t, func(o *valkey.ClientOption) { o.InitAddress = []string{p.Addr} })
		for _, name := range names {
			_, ok := listed(t, ctx, newBus(t, nc, bus.Config{}), name)
			require.True(t, ok, "%s listed through %s", name, p.Addr)
		}
	}
}

// TestWorkerRelistsItsQueue: a worker's queue whose registry entry went away while it runs (a
// forced failover to a replica that had not seen the ZADD, an operator's ZREM) is listed
// again, with stats on and off: a queue only workers touch must not vanish from the tools
// (and emq refuses a queue not in the registry).
func TestWorkerRelistsItsQueue(t *testing.T) {
	t.Parallel()
	for _, every := range []time.Duration{50 * time.Millisecond, -1} {
		t.Run(fmt.Sprint("stats ", every), func(t *testing.T) {
			t.Parallel()
			ctx, c, b, name, _ := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
			bus.SetRelistEvery(b, 50*time.Millisecond)
			startWorker(t, b, bus.WorkerConfig{Queue: name, StatsInterval: every, HousekeepInterval: 50 * time.Millisecond, Logger: quiet},
				func(w *bus.Worker) {
					bus.MustHandle(w, "k", func(context.Context, *bus.Task[args]) error { return nil }, nil)
				})
			valkeytest.Eventually(t, 10*time.Second, "the worker to list its queue", func() bool {
				_, ok := listed(t, ctx, b, name)
				return ok
			})
			require.NoError(t, c.Do(ctx, c.B().Zrem().Key(keys.QueueRegistry()).Member(name).Build()).Error())
			valkeytest.Eventually(t, 10*time.Second, "the worker to list its queue again", func() bool {
				_, ok := listed(t, ctx, b, name)
				return ok
			})
		})
	}
}
