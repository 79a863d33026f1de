package bench

// Our cache's rows of the report: each reads SampleRow through a cache.Table exactly as the
// baseline beside it reads it raw, so the ratio is what EchoCache's machinery adds.

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/tables"
)

func loadRow(_ context.Context, id int64) (Row, error) { return SampleRow(id), nil }

// benchCacheTable makes a cache over a new client and one table no other benchmark uses.
func benchCacheTable(b *testing.B, client valkey.Client, spec tables.Spec) *cache.Table[int64, Row] {
	b.Helper()
	return benchCacheTableWith(b, client, spec, cache.Config{})
}

// benchCacheTableWith is benchCacheTable with the cache's Config.
func benchCacheTableWith(b *testing.B, client valkey.Client, spec tables.Spec, cfg cache.Config) *cache.Table[int64, Row] {
	b.Helper()
	return benchCacheTableCodec(b, client, spec, cfg, nil)
}

// benchCacheTableCodec is benchCacheTableWith with the table's codec (nil: JSON).
func benchCacheTableCodec(b *testing.B, client valkey.Client, spec tables.Spec, cfg cache.Config, codec cache.Codec[Row]) *cache.Table[int64, Row] {
	b.Helper()
	c, err := cache.New(client, cfg)
	require.NoError(b, err)
	b.Cleanup(c.Close)
	if spec.Name == "" {
		spec.Name = UniqueName(b.Name())
	}
	if spec.TTL == 0 {
		spec.TTL = rowTTL
	}
	t, err := cache.NewTable(c, spec, loadRow, &cache.TableOpts[int64, Row]{
		Codec: codec,
		BatchLoad: func(_ context.Context, ids []int64) (map[int64]Row, error) {
			out := make(map[int64]Row, len(ids))
			for _, id := range ids {
				out[id] = SampleRow(id)
			}
			return out, nil
		},
	})
	require.NoError(b, err)
	return t
}

// warmL1 fills id and waits until the next Get is an L1 hit.
func warmL1(b *testing.B, t *cache.Table[int64, Row], id int64) {
	b.Helper()
	ctx := context.Background()
	require.Eventually(b, func() bool {
		v, tier, err := t.Lookup(ctx, id)
		return err == nil && tier == cache.TierL1 && v == SampleRow(id)
	}, 10*time.Second, time.Millisecond)
}

// l1Side is Table.Get of a warm L1 entry as a Compare side.
func l1Side(b *testing.B) Side {
	t := benchCacheTable(b, valkeytest.Shared(b).Client(b), tables.Spec{})
	warmL1(b, t, rowID)
	ctx := context.Background()
	return Side{Name: "l1", Op: func(b *testing.B) {
		if _, err := t.Get(ctx, rowID); err != nil {
			b.Fatal(err)
		}
	}}
}

// BenchmarkCacheL1Hit: Table.Get answered by L1 (the seed: 762 ns).
func BenchmarkCacheL1Hit(b *testing.B) { serialAndParallel(b, l1Side(b)) }

// serialAndParallel runs side's op as the sub-benchmarks "serial" and "parallel".
func serialAndParallel(b *testing.B, side Side) {
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			side.Op(b)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				side.Op(b)
			}
		})
	})
}

// BenchmarkCompareL1 interleaves Table.Get (L1 hit) with a raw ristretto Get of the same row.
func BenchmarkCompareL1(b *testing.B) {
	c, key := newRistretto(b)
	b.ReportAllocs()
	Compare(b, l1Side(b), Side{Name: "ristretto", Op: func(b *testing.B) {
		if _, ok := ristrettoGet(c, key); !ok {
			b.Fatal("miss")
		}
	}})
}

// l2Side is Table.Get with L1 off, so every read is an L2 hit (row read and decoded).
func l2Side(b *testing.B) Side { return l2SideOn(b, valkeytest.Shared(b).Client(b)) }

// l2SideOn is l2Side over a cache on the client c.
func l2SideOn(b *testing.B, c valkey.Client) Side {
	t := benchCacheTable(b, c, tables.Spec{L1TTL: tables.Off, EarlyRefreshBeta: tables.Off})
	ctx := context.Background()
	_, err := t.Get(ctx, rowID) // the fill writes the row
	require.NoError(b, err)
	_, tier, err := t.Lookup(ctx, rowID)
	require.NoError(b, err)
	require.Equal(b, cache.TierL2, tier)
	return Side{Name: "l2", Op: func(b *testing.B) {
		if _, err := t.Get(ctx, rowID); err != nil {
			b.Fatal(err)
		}
	}}
}

// BenchmarkCacheL2Hit: Table.Get answered by the L2 row (the seed: 31 µs).
func BenchmarkCacheL2Hit(b *testing.B) { serialAndParallel(b, l2Side(b)) }

// BenchmarkCompareL2 interleaves an L2 hit with a raw GET of a row of the same bytes, on the
// cache's client.
func BenchmarkCompareL2(b *testing.B) {
	c := valkeytest.Shared(b).Client(b)
	b.ReportAllocs()
	Compare(b, l2SideOn(b, c), getSideOn(b, c, "get"))
}

// BenchmarkCacheMissFill: a Get of an id never read, so the fill leases the row, runs the
// (instant) loader and writes the row with cache_fill. L1 is off so nothing else is timed.
func BenchmarkCacheMissFill(b *testing.B) {
	t := benchCacheTable(b, valkeytest.Shared(b).Client(b), tables.Spec{L1TTL: tables.Off, EarlyRefreshBeta: tables.Off})
	ctx := context.Background()
	b.ReportAllocs()
	var id int64
	for b.Loop() {
		id++
		if _, err := t.Get(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCompareMissFill interleaves a miss-and-fill (as BenchmarkCacheMissFill) with the
// raw cache-aside miss of BenchmarkValkeyMissFill (GET nil, then SET PX of a new id), so the
// ratio of the two survives the machine's noise; both on the cache's client.
func BenchmarkCompareMissFill(b *testing.B) {
	c := valkeytest.Shared(b).Client(b)
	t := benchCacheTable(b, c, tables.Spec{L1TTL: tables.Off, EarlyRefreshBeta: tables.Off})
	raw := benchTable(b)
	val := valkey.BinaryString(SampleRowJSON(rowID))
	ctx := context.Background()
	b.ReportAllocs()
	var ours, base int64
	Compare(b, Side{Name: "fill", Op: func(b *testing.B) {
		ours++
		if _, err := t.Get(ctx, ours); err != nil {
			b.Fatal(err)
		}
	}}, Side{Name: "raw", Op: func(b *testing.B) {
		base++
		key := raw.RowPrefix() + strconv.FormatInt(base, 10)
		if err := c.Do(ctx, c.B().Get().Key(key).Build()).Error(); !valkey.IsValkeyNil(err) {
			b.Fatalf("GET %s: want a miss, got %v", key, err)
		}
		if err := c.Do(ctx, c.B().Set().Key(key).Value(val).Px(rowTTL).Build()).Error(); err != nil {
			b.Fatal(err)
		}
	}})
}

// getManyTable is a table (L1 off, the codec given; nil: JSON) on the client c whose manyIDs
// rows are all in L2, and its ids.
func getManyTable(b *testing.B, c valkey.Client, codec cache.Codec[Row]) (*cache.Table[int64, Row], []int64) {
	b.Helper()
	t := benchCacheTableCodec(b, c, tables.Spec{L1TTL: tables.Off, EarlyRefreshBeta: tables.Off}, cache.Config{}, codec)
	ids := make([]int64, manyIDs)
	for i := range ids {
		ids[i] = int64(i + 1)
	}
	got, err := t.GetMany(context.Background(), ids) // fills every row
	require.NoError(b, err)
	require.Len(b, got, manyIDs)
	return t, ids
}

// getManySide is GetMany of the table's ids as a Compare side.
func getManySide(t *cache.Table[int64, Row], ids []int64) Side {
	ctx := context.Background()
	return Side{Name: "getmany", Op: func(b *testing.B) {
		m, err := t.GetMany(ctx, ids)
		if err != nil || len(m) != manyIDs {
			b.Fatalf("GetMany: %d rows, %v", len(m), err)
		}
	}}
}

// mgetSide is a raw MGET of the very rows GetMany reads (the same keys and bytes, not
// decoded), as BenchmarkValkeyMGet reads its own, on the client c (the table's).
func mgetSide(b *testing.B, c valkey.Client, t *cache.Table[int64, Row], ids []int64) Side {
	b.Helper()
	ks := make([]string, len(ids))
	for i, id := range ids {
		k, err := keys.MustTable(t.Name()).Row(strconv.FormatInt(id, 10))
		require.NoError(b, err)
		ks[i] = k
	}
	ctx := context.Background()
	return Side{Name: "mget", Op: func(b *testing.B) {
		vals, err := c.Do(ctx, c.B().Mget().Key(ks...).Build()).AsStrSlice()
		if err != nil || len(vals) != manyIDs || vals[manyIDs-1] == "" {
			b.Fatalf("MGET: %d values, %v", len(vals), err)
		}
	}}
}

// BenchmarkCacheGetMany: GetMany of 100 ids whose rows are in L2 (L1 off): one MGET and the
// JSON decodes.
func BenchmarkCacheGetMany(b *testing.B) {
	t, ids := getManyTable(b, valkeytest.Shared(b).Client(b), nil)
	side := getManySide(t, ids)
	b.ReportAllocs()
	for b.Loop() {
		side.Op(b)
	}
}

// BenchmarkCacheGetManyMsgpack is BenchmarkCacheGetMany over a table with the Msgpack codec.
func BenchmarkCacheGetManyMsgpack(b *testing.B) {
	t, ids := getManyTable(b, valkeytest.Shared(b).Client(b), cache.Msgpack[Row]{})
	side := getManySide(t, ids)
	b.ReportAllocs()
	for b.Loop() {
		side.Op(b)
	}
}

// BenchmarkCompareGetMany interleaves GetMany of 100 L2 rows (JSON) with a raw MGET of the
// same 100 rows, on the table's client.
func BenchmarkCompareGetMany(b *testing.B) {
	c := valkeytest.Shared(b).Client(b)
	t, ids := getManyTable(b, c, nil)
	b.ReportAllocs()
	Compare(b, getManySide(t, ids), mgetSide(b, c, t, ids))
}

// BenchmarkCompareGetManyMsgpack is BenchmarkCompareGetMany with the Msgpack codec.
func BenchmarkCompareGetManyMsgpack(b *testing.B) {
	c := valkeytest.Shared(b).Client(b)
	t, ids := getManyTable(b, c, cache.Msgpack[Row]{})
	b.ReportAllocs()
	Compare(b, getManySide(t, ids), mgetSide(b, c, t, ids))
}

// invalidationSide is InvalidationSide over two clients of the shared server.
func invalidationSide(b *testing.B) LatencySide {
	srv := valkeytest.Shared(b)
	return InvalidationSide(b, srv.Client(b), srv.Client(b), UniqueName(b.Name()))
}

// BenchmarkCacheInvalidation reports p50 and p99 of invalidation propagation.
func BenchmarkCacheInvalidation(b *testing.B) {
	side := invalidationSide(b)
	var l Latencies
	b.ReportAllocs()
	for b.Loop() {
		l.Add(side.Op(b))
	}
	l.Report(b)
}

// BenchmarkCompareInvalidation interleaves our propagation with a raw SPUBLISH→receive.
// The raw round trip publishes on the writing cache's client and receives on the reading
// cache's.
func BenchmarkCompareInvalidation(b *testing.B) {
	srv := valkeytest.Shared(b)
	writer, reader := srv.Client(b), srv.Client(b)
	ours := InvalidationSide(b, writer, reader, UniqueName(b.Name()))
	raw := PubSubRoundTrip(b, writer, reader, "bench-raw-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	b.ReportAllocs()
	CompareLatency(b, ours, raw)
}
