package bench

// Baselines: the raw building blocks that our figures are divided by. Each is
// written as a user of the raw library would write it, with no tricks that
// our code could not also use (no pinned commands, no reused buffers), so that
// a ratio measures what our machinery adds.

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/dgraph-io/ristretto/v2"
	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

const (
	// rowID is the id every hit benchmark reads.
	rowID = 42
	// manyIDs is how many rows a GetMany / MGET benchmark reads per op.
	manyIDs = 100
	// rowTTL is the TTL of rows written by fill benchmarks; long enough to
	// outlive a run, short enough not to pile up on a reused server.
	rowTTL = 10 * time.Minute
)

// newRistretto returns a ristretto cache shaped as a table's L1 (an integer key, a pointer
// value, every entry of cost 1, IgnoreInternalCost) holding SampleRow(rowID) under the key
// rowID, and waits until the value is readable (ristretto's Set is buffered). A cache of Row
// values under string keys, as this baseline once was, reads 2 to 3 times slower: it would
// flatter the table.
func newRistretto(b *testing.B) (*ristretto.Cache[int64, *Row], int64) {
	b.Helper()
	c, err := ristretto.NewCache(&ristretto.Config[int64, *Row]{
		NumCounters:        10_000,
		MaxCost:            1_000,
		BufferItems:        64,
		IgnoreInternalCost: true,
	})
	require.NoError(b, err)
	b.Cleanup(c.Close)
	key := int64(rowID)
	row := SampleRow(rowID)
	require.True(b, c.Set(key, &row, 1))
	c.Wait()
	got, ok := ristrettoGet(c, key)
	require.True(b, ok, "ristretto lost the row after Wait")
	require.Equal(b, SampleRow(rowID), got)
	return c, key
}

// ristrettoGet is a hit as a caller of a raw ristretto reads one: the row copied out of the
// cached pointer, as Table.Get returns its V.
func ristrettoGet(c *ristretto.Cache[int64, *Row], key int64) (Row, bool) {
	p, ok := c.Get(key)
	if !ok {
		return Row{}, false
	}
	return *p, true
}

// BenchmarkRistrettoGet is the L1 baseline: a raw ristretto/v2 Get hit of
// the key that BenchmarkCacheL1Hit reads through Table.Get.
func BenchmarkRistrettoGet(b *testing.B) {
	c, key := newRistretto(b)
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := ristrettoGet(c, key); !ok {
				b.Fatal("miss")
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, ok := ristrettoGet(c, key); !ok {
					b.Error("miss")
					return
				}
			}
		})
	})
}

// benchTable returns a key builder for a table no other benchmark uses.
func benchTable(b *testing.B) keys.Table {
	b.Helper()
	t, err := keys.NewTable(UniqueName(b.Name()))
	require.NoError(b, err)
	return t
}

// rowKey is the L2 row key of id in t.
func rowKey(b *testing.B, t keys.Table, id int64) string {
	b.Helper()
	k, err := t.Row(strconv.FormatInt(id, 10))
	require.NoError(b, err)
	return k
}

// BenchmarkValkeyGet is the L2 baseline: a raw valkey-go GET of one small
// row (DisableCache client, so every call is a round trip).
func BenchmarkValkeyGet(b *testing.B) {
	ctx := context.Background()
	c := valkeytest.Shared(b).Client(b)
	key := rowKey(b, benchTable(b), rowID)
	want := SampleRowJSON(rowID)
	require.NoError(b, c.Do(ctx, c.B().Set().Key(key).Value(valkey.BinaryString(want)).Px(rowTTL).Build()).Error())
	got, err := c.Do(ctx, c.B().Get().Key(key).Build()).AsBytes()
	require.NoError(b, err)
	require.Equal(b, want, got)

	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Do(ctx, c.B().Get().Key(key).Build()).AsBytes(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := c.Do(ctx, c.B().Get().Key(key).Build()).AsBytes(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkValkeyMissFill is the miss-and-fill baseline: what the least a
// cache-aside reader does on a miss, a GET that answers nil and then a
// SET ... PX of the loaded row (two round trips; the loader itself is free).
// Each op reads and fills a row id not used before.
func BenchmarkValkeyMissFill(b *testing.B) {
	ctx := context.Background()
	c := valkeytest.Shared(b).Client(b)
	table := benchTable(b)
	val := valkey.BinaryString(SampleRowJSON(rowID))
	b.ReportAllocs()
	var id int64
	for b.Loop() {
		id++
		key := table.RowPrefix() + strconv.FormatInt(id, 10)
		err := c.Do(ctx, c.B().Get().Key(key).Build()).Error()
		if !valkey.IsValkeyNil(err) {
			b.Fatalf("GET %s: want a miss, got %v", key, err)
		}
		if err := c.Do(ctx, c.B().Set().Key(key).Value(val).Px(rowTTL).Build()).Error(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValkeyMGet is the GetMany baseline: one raw MGET of manyIDs rows
// of one table (one slot), every one present. ns/op is per MGET.
func BenchmarkValkeyMGet(b *testing.B) {
	ctx := context.Background()
	c := valkeytest.Shared(b).Client(b)
	table := benchTable(b)
	ks := make([]string, manyIDs)
	cmds := make(valkey.Commands, 0, manyIDs)
	for i := range ks {
		ks[i] = rowKey(b, table, int64(i+1))
		cmds = append(cmds, c.B().Set().Key(ks[i]).Value(valkey.BinaryString(SampleRowJSON(int64(i+1)))).Px(rowTTL).Build())
	}
	for _, r := range c.DoMulti(ctx, cmds...) {
		require.NoError(b, r.Error())
	}
	b.ReportAllocs()
	for b.Loop() {
		vals, err := c.Do(ctx, c.B().Mget().Key(ks...).Build()).AsStrSlice()
		if err != nil {
			b.Fatal(err)
		}
		if len(vals) != manyIDs || vals[manyIDs-1] == "" {
			b.Fatalf("MGET answered %d values", len(vals))
		}
	}
}

// BenchmarkPubSubRoundTrip is the propagation baseline: a raw SPUBLISH on a
// table's invalidation channel (sharded pub/sub) until a second client's
// valkey-go Receive callback sees it (bench.PubSubRoundTrip). ns/op is the
// mean round trip; p50-ns and p99-ns are its percentiles.
func BenchmarkPubSubRoundTrip(b *testing.B) {
	srv := valkeytest.Shared(b)
	side := PubSubRoundTrip(b, srv.Client(b), srv.Client(b), benchTable(b).Inval())
	var lat Latencies
	b.ReportAllocs()
	for b.Loop() {
		lat.Add(side.Op(b))
	}
	lat.Report(b)
}
