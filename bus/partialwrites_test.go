package bus_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
)

// No partial writes: each test runs a script of the bundle against a real server in a state
// where it used to fail after its first write (law 1: a refused call writes nothing; a script
// that errors after a write leaves a partial write). Each asserts that the call either does
// all of its work or is refused with the keyspace exactly as it was.

// manyLanes is how many distinct lanes the many-lane cases use: more than 4000, so that a
// list of two values per lane passes Lua's unpack bound (8000 values).
const manyLanes = 4001

// doAll runs commands in one round trip and fails on the first error.
func doAll(t *testing.T, c valkey.Client, cmds valkey.Commands) {
	t.Helper()
	for i := 0; i < len(cmds); i += 2000 {
		part := cmds[i:min(i+2000, len(cmds))]
		for _, r := range c.DoMulti(context.Background(), part...) {
			require.NoError(t, r.Error())
		}
	}
}

// manyLaneJobs writes, by hand, n jobs each of a lane of its own (lane L<i>), in state with
// attempts 1, each lane counting active claimed jobs in laneactive; where is the set (and its
// score) the ids go to. It returns the ids.
func manyLaneJobs(t *testing.T, c valkey.Client, q keys.Queue, n int, state, where string, score int64, active int) []string {
	t.Helper()
	var cmds valkey.Commands
	ids := make([]string, n)
	for i := range ids {
		id := keys.NewJobID()
		ids[i] = id.String()
		jk, err := q.Job(id)
		require.NoError(t, err)
		lane := "L" + strconv.Itoa(i)
		cmds = append(cmds,
			c.B().Hset().Key(jk).FieldValue().FieldValue("state", state).FieldValue("attempts", "1").FieldValue("payload", "p").Build(),
			c.B().Zadd().Key(where).ScoreMember().ScoreMember(float64(score), ids[i]).Build(),
			c.B().Hset().Key(q.JobLane()).FieldValue().FieldValue(ids[i], "0:0:"+lane).Build())
		if active > 0 {
			cmds = append(cmds, c.B().Hset().Key(q.LaneActive()).FieldValue().FieldValue(lane, strconv.Itoa(active)).Build())
		}
	}
	doAll(t, c, cmds)
	return ids
}

// refusedOrDone fails unless err is nil, or the keyspace of the queue or table name is
// exactly before.
func refusedOrDone(t *testing.T, tg valkeytest.Target, name string, before state, err error) {
	t.Helper()
	if err != nil {
		after := snapshot(t, tg, name)
		changed := 0
		for k, v := range before {
			if after[k] != v {
				changed++
			}
		}
		for k := range after {
			if _, ok := before[k]; !ok {
				changed++
			}
		}
		require.Zero(t, changed, "a refused call (%v) must write nothing: %d keys changed", err, changed)
		require.FailNow(t, "refused", "the call was refused: %v", err)
	}
}

// requireLaneCounts fails unless laneactive holds exactly n lanes, each counting want.
func requireLaneCounts(t *testing.T, c valkey.Client, q keys.Queue, n int, want string) {
	t.Helper()
	m, err := c.Do(context.Background(), c.B().Hgetall().Key(q.LaneActive()).Build()).AsStrMap()
	require.NoError(t, err)
	require.Len(t, m, n)
	for lane, v := range m {
		require.Equal(t, want, v, lane)
	}
}

// TestNoPartialWriteCompleteManyManyLanes: completemany retiring jobs of more than 4000 lanes
// used to retire them (ZREM, DEL, HDEL joblane) and then fail in its lane bookkeeping (an
// unbounded unpack), leaving every lane's laneactive count one too high.
func TestNoPartialWriteCompleteManyManyLanes(t *testing.T) {
	t.Parallel()
	c := valkeytest.Shared(t).Client(t)
	tg := valkeytest.Target{Name: "standalone", Client: c}
	name := valkeytest.TestName(t)
	q := keys.MustQueue(name)
	ids := manyLaneJobs(t, c, q, manyLanes, "active", q.Active(), 1<<50, 2)
	args := make([]string, 0, 2*len(ids))
	for _, id := range ids {
		args = append(args, id, "1")
	}
	before := snapshot(t, tg, name)
	res, err := lua.Get("completemany").Exec(context.Background(), c, []string{q.Active()}, args).ToArray()
	refusedOrDone(t, tg, name, before, err)
	n, err := res[0].AsInt64()
	require.NoError(t, err)
	require.EqualValues(t, manyLanes, n)
	requireLaneCounts(t, c, q, manyLanes, "1")
	require.Empty(t, scanAll(t, c, q.JobPrefix()))
}

// TestNoPartialWriteReapManyLanes: reap moving expired jobs of more than 4000 lanes used to
// requeue them and then fail in its lane bookkeeping, leaving the lanes' counts one too high.
func TestNoPartialWriteReapManyLanes(t *testing.T) {
	t.Parallel()
	c := valkeytest.Shared(t).Client(t)
	tg := valkeytest.Target{Name: "standalone", Client: c}
	name := valkeytest.TestName(t)
	q := keys.MustQueue(name)
	manyLaneJobs(t, c, q, manyLanes, "active", q.Active(), 1, 2)
	before := snapshot(t, tg, name)
	res, err := lua.Get("reap").Exec(context.Background(), c,
		[]string{q.Active(), q.Pending(), q.Dead(), q.Meta(), q.Wake()}, []string{"10000", "0", "0"}).ToArray()
	refusedOrDone(t, tg, name, before, err)
	requeued, err := res[0].ToArray()
	require.NoError(t, err)
	require.Len(t, requeued, manyLanes)
	requireLaneCounts(t, c, q, manyLanes, "1")
}

func laneclaimKeys(q keys.Queue) []string {
	return []string{q.Pending(), q.Active(), q.Schedule(), q.Meta(), q.Flow(), q.Lanes(), q.LaneActive(),
		q.LaneReady(), q.LaneWait(), q.JobLane(), q.Urgent()}
}

// TestNoPartialWriteLaneClaimManyLanes: laneclaim retiring finished jobs of more than 4000
// lanes, or promoting due jobs of more than 4000 lanes, used to write (retire, promote) and
// then fail writing laneactive or laneready (an unbounded unpack).
func TestNoPartialWriteLaneClaimManyLanes(t *testing.T) {
	t.Parallel()
	c := valkeytest.Shared(t).Client(t)
	tg := valkeytest.Target{Name: "standalone", Client: c}

	t.Run("retire", func(t *testing.T) {
		t.Parallel()
		name := valkeytest.TestName(t)
		q := keys.MustQueue(name)
		ids := manyLaneJobs(t, c, q, manyLanes, "active", q.Active(), 1<<50, 2)
		args := []string{"30000", "1", "0"}
		for _, id := range ids {
			args = append(args, id, "1")
		}
		before := snapshot(t, tg, name)
		res, err := lua.Get("laneclaim").Exec(context.Background(), c, laneclaimKeys(q), args).ToArray()
		refusedOrDone(t, tg, name, before, err)
		n, err := res[3].AsInt64()
		require.NoError(t, err)
		require.EqualValues(t, manyLanes, n)
		requireLaneCounts(t, c, q, manyLanes, "1")
	})

	t.Run("promote", func(t *testing.T) {
		t.Parallel()
		name := valkeytest.TestName(t)
		q := keys.MustQueue(name)
		manyLaneJobs(t, c, q, manyLanes, "scheduled", q.Schedule(), 1, 0)
		before := snapshot(t, tg, name)
		_, err := lua.Get("laneclaim").Exec(context.Background(), c, laneclaimKeys(q), []string{"30000", "1", "10000"}).ToArray()
		refusedOrDone(t, tg, name, before, err)
		// Every lane got its job back and joined laneready; the one claim took one of them.
		ready, err := c.Do(context.Background(), c.B().Zcard().Key(q.LaneReady()).Build()).AsInt64()
		require.NoError(t, err)
		require.GreaterOrEqual(t, ready, int64(manyLanes-1))
		sched, err := c.Do(context.Background(), c.B().Zcard().Key(q.Schedule()).Build()).AsInt64()
		require.NoError(t, err)
		require.Zero(t, sched)
	})
}

// TestNoPartialWriteCacheRecordSeq: a table's record whose seq is not an integer used to let
// cache_set write the row (and cache_invalidate delete the rows, cache_flush delete them and
// replace the epoch) before HINCRBY failed on seq: a row changed with no sequence bump and no
// invalidation published. Each must be refused (ECCTYPE) with nothing written.
func TestNoPartialWriteCacheRecordSeq(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := valkeytest.Shared(t).Client(t)
	tg := valkeytest.Target{Name: "standalone", Client: c}
	const tok = "AAAAAAAAAAAAAAAA"
	row := "\xEC\x01V" + tok + "\x00\x00\x00\x00" + "\x00\x00\x00\x00\x00\x00\x00\x00" + "v"
	for _, tc := range []struct {
		name string
		run  func(rec, inval string) error
	}{
		{"cache_set", func(rec, inval string) error {
			return lua.Get("cache_set").Exec(ctx, c, []string{rec, inval}, []string{tok, "60000", "a", row}).Error()
		}},
		{"cache_invalidate", func(rec, inval string) error {
			return lua.Get("cache_invalidate").Exec(ctx, c, []string{rec, inval}, []string{tok, "a"}).Error()
		}},
		{"cache_flush", func(rec, inval string) error {
			// A walk is many calls: each step deletes what it found, the last one bumps seq.
			cursor := "0"
			for {
				res, err := lua.Get("cache_flush").Exec(ctx, c, []string{rec, inval}, []string{tok, cursor, "10000"}).ToArray()
				if err != nil {
					return err
				}
				if cursor, _ = res[0].ToString(); cursor == "0" {
					return nil
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			name := valkeytest.TestName(t)
			rec, inval := "ecc:{"+name+"}", "emq:{"+name+"}:inval"
			require.NoError(t, c.Do(ctx, c.B().Hset().Key(rec).FieldValue().FieldValue("epoch", "1.x").
				FieldValue("seq", "not a number").FieldValue("last", tok).Build()).Error())
			require.NoError(t, c.Do(ctx, c.B().Set().Key(rec+":a").Value("old").Build()).Error())
			before := snapshot(t, tg, name)
			err := tc.run(rec, inval)
			require.ErrorContains(t, err, "ECCTYPE")
			require.Equal(t, before, snapshot(t, tg, name), "a refused call must write nothing")
		})
	}
}

// TestNoPartialWriteFlowCounters: a queue's flow hash whose waiting is not an integer (the
// field HINCRBY moves), or whose vt is not a number (the score a lane rejoins laneready at),
// holds values no script of the bundle writes; each lane script that would move them after its
// first write refuses the call (EMQTYPE: ErrWrongType) with nothing written, instead of failing
// half way: laneenqueue with a lane, completemany of a laned job, a claim through laneclaim.
func TestNoPartialWriteFlowCounters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := valkeytest.Shared(t).Client(t)
	tg := valkeytest.Target{Name: "standalone", Client: c}
	b := newBus(t, c, bus.Config{})
	for _, field := range []struct{ name, value string }{{"waiting", "many"}, {"vt", "nan"}} {
		t.Run(field.name, func(t *testing.T) {
			t.Parallel()
			name := valkeytest.TestName(t)
			q := keys.MustQueue(name)
			_, err := b.EnqueueBatch(ctx, name, []bus.NewJob{{Payload: []byte("a")}, {Payload: []byte("b")}}, &bus.EnqueueOpts{Lane: "acme"})
			require.NoError(t, err)
			jobs, err := b.Claim(ctx, name, &bus.ClaimOpts{Count: 1})
			require.NoError(t, err)
			require.Len(t, jobs, 1)
			require.NoError(t, c.Do(ctx, c.B().Hset().Key(q.Flow()).FieldValue().FieldValue(field.name, field.value).Build()).Error())
			for _, call := range []struct {
				op  string
				run func() error
			}{
				{"laneenqueue", func() error {
					_, err := b.Enqueue(ctx, name, []byte("c"), &bus.EnqueueOpts{Lane: "acme"})
					return err
				}},
				{"completemany", func() error {
					_, err := b.CompleteMany(ctx, jobs, nil)
					return err
				}},
				{"laneclaim", func() error {
					_, err := b.Claim(ctx, name, &bus.ClaimOpts{Count: 1})
					return err
				}},
			} {
				before := snapshot(t, tg, name)
				err := call.run()
				require.ErrorIs(t, err, bus.ErrWrongType, call.op)
				require.ErrorContains(t, err, "flow holds a waiting", call.op)
				require.Equal(t, before, snapshot(t, tg, name), "%s: a refused call must write nothing", call.op)
			}
		})
	}
}
