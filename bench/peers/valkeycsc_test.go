package peers

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/bench"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

const (
	rowID = 42
	// cscTTL is the client-side TTL given to DoCache; the entry must never
	// expire during a run, only be invalidated.
	cscTTL = time.Hour
	// waitTimeout bounds any wait for a message inside a benchmark.
	waitTimeout = 30 * time.Second
)

// rowKey is the L2 row key of id in a table no other benchmark uses: the
// peers read keys of the same form as ours.
func rowKey(b *testing.B, id int64) string {
	b.Helper()
	t, err := keys.NewTable(bench.UniqueName(b.Name()))
	require.NoError(b, err)
	k, err := t.Row(strconv.FormatInt(id, 10))
	require.NoError(b, err)
	return k
}

// cachingClient is a valkey-go client with client-side caching on (RESP3
// tracking, default mode); onInval, if not nil, receives every invalidation.
func cachingClient(b *testing.B, srv *valkeytest.Server, onInval func([]valkey.ValkeyMessage)) valkey.Client {
	b.Helper()
	return srv.ClientWith(b, func(o *valkey.ClientOption) {
		o.DisableCache = false
		o.OnInvalidations = onInval
	})
}

// BenchmarkValkeyDoCacheHit is valkey-go's client-side caching hit: DoCache
// of a GET whose reply is already in the client's cache. "serial" and
// "parallel" decode the JSON row into a bench.Row, as a user who wants the
// row must (valkey-go caches the reply, not the decoded value); "raw-bytes"
// stops at the bytes, the lower bound.
func BenchmarkValkeyDoCacheHit(b *testing.B) {
	ctx := context.Background()
	srv := valkeytest.Shared(b)
	key := rowKey(b, rowID)
	w := srv.Client(b)
	require.NoError(b, w.Do(ctx, w.B().Set().Key(key).Value(valkey.BinaryString(bench.SampleRowJSON(rowID))).Build()).Error())
	c := cachingClient(b, srv, nil)
	get := func() valkey.ValkeyResult { return c.DoCache(ctx, c.B().Get().Key(key).Cache(), cscTTL) }
	require.NoError(b, get().Error())
	first := get()
	require.True(b, first.IsCacheHit(), "second DoCache was not a cache hit")
	var row bench.Row
	require.NoError(b, first.DecodeJSON(&row))
	require.Equal(b, bench.SampleRow(rowID), row)

	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		var row bench.Row
		for b.Loop() {
			r := get()
			if !r.IsCacheHit() {
				b.Fatal("cache miss")
			}
			if err := r.DecodeJSON(&row); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			var row bench.Row
			for pb.Next() {
				r := get()
				if !r.IsCacheHit() {
					b.Error("cache miss")
					return
				}
				if err := r.DecodeJSON(&row); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("raw-bytes", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r := get()
			if !r.IsCacheHit() {
				b.Fatal("cache miss")
			}
			if _, err := r.AsBytes(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// cscInvalidation returns valkey-go's invalidation propagation as a
// bench.LatencySide named "csc": a caching client holds a key, a second
// client SETs it, and the op's span runs from sending the SET until the
// caching client's OnInvalidations callback sees the key. Before that span
// the op re-reads the key through DoCache (re-arming tracking after the last
// invalidation) and fails the benchmark unless it sees the value last
// written: the caching client must see every write. check verifies the last
// write once more, for the end of a benchmark.
func cscInvalidation(b *testing.B, writer valkey.Client) (side bench.LatencySide, check func()) {
	b.Helper()
	ctx := context.Background()
	srv := valkeytest.Shared(b)
	key := rowKey(b, rowID)
	inval := make(chan struct{}, 1)
	reader := cachingClient(b, srv, func(ms []valkey.ValkeyMessage) {
		for _, m := range ms {
			if s, err := m.ToString(); err == nil && s == key {
				select {
				case inval <- struct{}{}:
				default: // one write in flight at a time; a repeat is harmless
				}
			}
		}
	})
	set := func(v int) error {
		return writer.Do(ctx, writer.B().Set().Key(key).Value(strconv.Itoa(v)).Build()).Error()
	}
	read := func() (int, error) {
		s, err := reader.DoCache(ctx, reader.B().Get().Key(key).Cache(), cscTTL).ToString()
		if err != nil {
			return 0, err
		}
		return strconv.Atoi(s)
	}
	require.NoError(b, set(0))
	v := 0
	wait := time.NewTimer(waitTimeout)
	wait.Stop()
	side = bench.LatencySide{Name: "csc", Op: func(b *testing.B) time.Duration {
		got, err := read() // a miss after each invalidation: re-arms tracking
		if err != nil {
			b.Fatal(err)
		}
		if got != v {
			b.Fatalf("caching client read %d after the write of %d was propagated", got, v)
		}
		v++
		start := time.Now()
		if err := set(v); err != nil {
			b.Fatal(err)
		}
		wait.Reset(waitTimeout)
		select {
		case <-inval:
		case <-wait.C:
			b.Fatal("invalidation not received")
		}
		d := time.Since(start)
		wait.Stop()
		return d
	}}
	check = func() {
		got, err := read()
		require.NoError(b, err)
		require.Equal(b, v, got, "caching client missed the last write")
	}
	return side, check
}

// BenchmarkValkeyCSCInvalidation is valkey-go's invalidation propagation
// (cscInvalidation): p50-ns and p99-ns time the span write sent →
// invalidation received, the span ours is measured on; ns/op is the whole
// cycle, including the re-read that must see the new value.
func BenchmarkValkeyCSCInvalidation(b *testing.B) {
	side, check := cscInvalidation(b, valkeytest.Shared(b).Client(b))
	var lat bench.Latencies
	b.ReportAllocs()
	for b.Loop() {
		lat.Add(side.Op(b))
	}
	check()
	lat.Report(b)
}

// BenchmarkCompareInvalidationCSC interleaves EchoCache's invalidation propagation
// (bench.InvalidationSide: Invalidate in one cache until the other's subscriber applied it)
// with valkey-go's client-side caching invalidation (cscInvalidation: SET until the caching
// client's OnInvalidations callback), each waiting on a channel its callback signals. Both
// write through one client, the writing cache's.
func BenchmarkCompareInvalidationCSC(b *testing.B) {
	srv := valkeytest.Shared(b)
	writer := srv.Client(b)
	ours := bench.InvalidationSide(b, writer, srv.Client(b), bench.UniqueName(b.Name()))
	csc, check := cscInvalidation(b, writer)
	b.ReportAllocs()
	bench.CompareLatency(b, ours, csc)
	check()
}
