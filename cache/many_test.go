package cache_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/tables"
)

// batchSource is a batch loader that records its calls; ids in gone do not exist.
type batchSource struct {
	mu    sync.Mutex
	calls [][]string
	gone  map[string]bool
	fail  error
}

func (b *batchSource) load(_ context.Context, ids []string) (map[string]user, error) {
	b.mu.Lock()
	b.calls = append(b.calls, slices.Clone(ids))
	b.mu.Unlock()
	if b.fail != nil {
		return nil, b.fail
	}
	out := make(map[string]user, len(ids))
	for _, id := range ids {
		if !b.gone[id] {
			out[id] = user{ID: id, Name: "name-" + id}
		}
	}
	return out, nil
}

func (b *batchSource) callsSoFar() [][]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.calls)
}

// commandCalls reads calls=N for cmd from INFO commandstats of the node at srv.
func commandCalls(t *testing.T, srv *valkeytest.Server, cmd string) int {
	t.Helper()
	info, err := srv.Do(context.Background(), "INFO", "commandstats")
	require.NoError(t, err)
	for line := range strings.SplitSeq(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":calls="); ok {
			n, err := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			require.NoError(t, err)
			return n
		}
	}
	return 0
}

func ids(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("u%02d", i))
	}
	return out
}

// TestGetMany: 100 ids, 30 in L1, 30 only in L2, 40 missing (10 of which the source does not
// have): one MGET round trip, one batch-loader call with exactly the 40, one pipelined
// write; a second GetMany is served by L1 alone. Round trips are counted by the client;
// on the standalone server, which this test has to itself, MGET calls are also counted by
// the server (INFO commandstats). The shared cluster's nodes serve other tests' MGETs.
func TestGetMany(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		shards int
		setup  func(t *testing.T) (valkey.Client, func(key string) *valkeytest.Server)
	}{
		{"standalone", 1, func(t *testing.T) (valkey.Client, func(string) *valkeytest.Server) {
			srv := valkeytest.Start(t, valkeytest.WithoutPersistence()) // its own server: exact counts
			return srv.Client(t), func(string) *valkeytest.Server { return srv }
		}},
		{"cluster", 1, func(t *testing.T) (valkey.Client, func(string) *valkeytest.Server) {
			return valkeytest.SharedCluster(t).Client(t), nil
		}},
		{"cluster-8-shards", 8, func(t *testing.T) (valkey.Client, func(string) *valkeytest.Server) {
			return valkeytest.SharedCluster(t).Client(t), nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			raw, nodeOf := tc.setup(t)
			client := &countingClient{Client: raw}
			single := &source{}
			batch := &batchSource{gone: map[string]bool{}}
			for _, id := range ids(90, 100) {
				batch.gone[id] = true
			}
			// No stats: the publisher's EVALSHA would count among the trips measured below.
			c, err := cache.New(client, cache.Config{StatsInterval: -1})
			require.NoError(t, err)
			t.Cleanup(c.Close)
			tbl, err := cache.NewTable(c, tables.Spec{L2Timeout: relaxedL2, Name: tableName(t), Shards: tc.shards}, single.load,
				&cache.TableOpts[string, user]{BatchLoad: batch.load})
			require.NoError(t, err)
			mgetCalls := func() int {
				if nodeOf == nil {
					return 0
				}
				return commandCalls(t, nodeOf(rowKey(t, tbl, "u00")), "mget")
			}

			for _, id := range ids(0, 60) {
				_, err := tbl.Get(ctx, id)
				require.NoError(t, err)
			}
			for _, id := range ids(30, 60) {
				tbl.Forget(id) // in L2 only
			}
			require.Equal(t, int64(60), single.calls.Load())

			before := tbl.Stats()
			mgets := mgetCalls()
			client.reset()
			all := append(ids(0, 100), "u00", "u45", "u77") // duplicates are read once
			got, err := tbl.GetMany(ctx, all)
			require.NoError(t, err)

			require.Len(t, got, 90, "the 10 ids the source lacks are absent")
			for _, id := range ids(0, 90) {
				require.Equal(t, user{ID: id, Name: "name-" + id}, got[id], id)
			}
			calls := batch.callsSoFar()
			require.Len(t, calls, 1, "one batch-loader call")
			slices.Sort(calls[0])
			require.Equal(t, ids(60, 100), calls[0], "exactly the 40 missing ids")
			require.Equal(t, int64(60), single.calls.Load(), "the per-id loader is not used")

			if nodeOf != nil {
				require.Equal(t, mgets+1, mgetCalls(), "one MGET on the server")
			}
			trips, n := client.tripsWith("MGET")
			mgetsWanted := shardsOf(ids(30, 100), tc.shards)
			if strings.HasPrefix(tc.name, "cluster") {
				mgetsWanted = len(ids(30, 100)) // a command per row: see TestGetManyWhileSlotMigrates
			}
			require.Equal(t, [2]int{1, mgetsWanted}, [2]int{trips, n}, "one MGET per shard (per row on a cluster), in one round trip")
			trips, n = client.tripsWith("SET")
			require.Equal(t, [2]int{1, 40}, [2]int{trips, n}, "the 40 leases in one pipeline")
			trips, n = client.tripsWith("EVALSHA")
			require.Equal(t, [2]int{1, 40}, [2]int{trips, n}, "the 40 rows written in one pipeline")

			after := tbl.Stats()
			require.Equal(t, before.L1Hits+30, after.L1Hits)
			require.Equal(t, before.L2Hits+30, after.L2Hits)
			require.Equal(t, before.Loads+1, after.Loads)
			for _, id := range []string{"u60", "u89"} {
				require.Equal(t, "value", cache.ParsedKind(readRaw(t, raw, rowKey(t, tbl, id))))
			}
			require.Equal(t, "notfound", cache.ParsedKind(readRaw(t, raw, rowKey(t, tbl, "u95"))))

			client.reset()
			again, err := tbl.GetMany(ctx, all)
			require.NoError(t, err)
			require.Equal(t, got, again)
			trips, _ = client.tripsWith("MGET")
			require.Zero(t, trips, "everything, not-founds included, came from L1")
			require.Len(t, batch.callsSoFar(), 1)
			require.Equal(t, after.L1Hits+100, tbl.Stats().L1Hits)
		})
	}
}

// TestGetManyEdges: no batch loader (per-id loads), a row leased by a filler that died
// (waited for, then taken over), a failing batch (error, leases released, hits still
// returned), and an empty call.
func TestGetManyEdges(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, client valkey.Client) {
		ctx := context.Background()

		t.Run("per-id loader", func(t *testing.T) {
			src := &source{gone: map[string]bool{"u03": true}}
			tbl := newTable(t, newCache(t, client), tables.Spec{L2Timeout: relaxedL2}, src)
			got, err := tbl.GetMany(ctx, ids(0, 20))
			require.NoError(t, err)
			require.Len(t, got, 19)
			require.Equal(t, int64(20), src.calls.Load())
			require.Equal(t, "notfound", cache.ParsedKind(readRaw(t, client, rowKey(t, tbl, "u03"))))
			empty, err := tbl.GetMany(ctx, nil)
			require.NoError(t, err)
			require.Empty(t, empty)
		})

		t.Run("dead filler's lease", func(t *testing.T) {
			src := &source{}
			tbl := newTable(t, newCache(t, client), tables.Spec{L2Timeout: relaxedL2}, src)
			key := rowKey(t, tbl, "u01")
			require.NoError(t, client.Do(ctx, client.B().Set().Key(key).Value(cache.LeaseRow("deadfiller000000")).Px(300*time.Millisecond).Build()).Error())
			got, err := tbl.GetMany(ctx, ids(0, 3))
			require.NoError(t, err)
			require.Len(t, got, 3)
			st := tbl.Stats()
			require.Equal(t, int64(1), st.LeaseWaits)
			require.Equal(t, int64(1), st.LeaseTakeovers)
			require.Equal(t, int64(3), src.calls.Load())
			require.Equal(t, [2]int64{3, 0}, [2]int64{st.Misses, st.L2Hits}, "each id read counts once: three misses")
		})

		t.Run("failing batch", func(t *testing.T) {
			src := &source{}
			batch := &batchSource{fail: errors.New("source down")}
			tbl, err := cache.NewTable(newCache(t, client), tables.Spec{L2Timeout: relaxedL2, Name: tableName(t)}, src.load,
				&cache.TableOpts[string, user]{BatchLoad: batch.load})
			require.NoError(t, err)
			_, err = tbl.Get(ctx, "u00")
			require.NoError(t, err)
			got, err := tbl.GetMany(ctx, ids(0, 5))
			require.ErrorContains(t, err, "source down")
			var le *cache.LoadError
			require.ErrorAs(t, err, &le)
			require.Equal(t, 4, le.Batch)
			require.Equal(t, map[string]user{"u00": {ID: "u00", Name: "name-u00"}}, got, "what was cached is still returned")
			for _, id := range ids(1, 5) {
				require.Empty(t, readRaw(t, client, rowKey(t, tbl, id)), "lease on %s released", id)
			}
			require.Equal(t, int64(1), tbl.Stats().LoadErrors)
		})
	})
}

// shardsOf counts the shards of n that hold ids.
func shardsOf(ids []string, n int) int {
	seen := map[int]bool{}
	for _, id := range ids {
		seen[keys.ShardOf(id, n)] = true
	}
	return len(seen)
}
