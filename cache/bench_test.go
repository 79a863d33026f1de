package cache_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/dgraph-io/ristretto/v2"
	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/tables"
)

// The hot-path benchmarks compare EchoCache with its raw parts measured in the same run:
// an L1 hit through Table.Get against ristretto's Get of the same key (the entry stored
// without and with a TTL), and an L2 hit through Table.Get (L1 off) against valkey-go's GET
// of the same row. Compare with benchstat; the ratios are what the issue bounds.

const benchKey = "user-42"

func benchUser() user { return user{ID: "42", Name: "Ada Lovelace"} }

// warmTable returns a table whose benchKey is in L1 (or only in L2 with L1 off).
func warmTable(b *testing.B, client valkey.Client, spec tables.Spec) *cache.Table[string, user] {
	b.Helper()
	c, err := cache.New(client, cache.Config{})
	require.NoError(b, err)
	b.Cleanup(c.Close)
	spec.Name = tableName(b)
	tbl, err := cache.NewTable(c, spec, func(context.Context, string) (user, error) { return benchUser(), nil }, nil)
	require.NoError(b, err)
	_, err = tbl.Get(context.Background(), benchKey)
	require.NoError(b, err)
	tbl.WaitL1()
	return tbl
}

func rawRistretto(b *testing.B, ttl time.Duration) *ristretto.Cache[string, *user] {
	b.Helper()
	rc, err := ristretto.NewCache(&ristretto.Config[string, *user]{
		NumCounters: 10 * tables.DefaultL1MaxEntries, MaxCost: tables.DefaultL1MaxEntries,
		BufferItems: 64, IgnoreInternalCost: true,
	})
	require.NoError(b, err)
	b.Cleanup(rc.Close)
	u := benchUser()
	rc.SetWithTTL(benchKey, &u, 1, ttl)
	rc.Wait()
	_, ok := rc.Get(benchKey)
	require.True(b, ok)
	return rc
}

var sinkUser user

func BenchmarkL1Hit(b *testing.B) {
	ctx := context.Background()
	tbl := warmTable(b, valkeytest.Shared(b).Client(b), tables.Spec{TTL: time.Hour, L1TTL: time.Hour})
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			u, err := tbl.Get(ctx, benchKey)
			if err != nil {
				b.Fatal(err)
			}
			sinkUser = u
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			var u user
			for pb.Next() {
				u, _ = tbl.Get(ctx, benchKey)
			}
			_ = u
		})
	})
}

func BenchmarkRistrettoGet(b *testing.B) {
	for _, tc := range []struct {
		name string
		ttl  time.Duration
	}{{"noTTL", 0}, {"TTL", time.Hour}} {
		rc := rawRistretto(b, tc.ttl)
		b.Run(tc.name+"/serial", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p, ok := rc.Get(benchKey)
				if !ok {
					b.Fatal("miss")
				}
				sinkUser = *p
			}
		})
		b.Run(tc.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				var u user
				for pb.Next() {
					p, _ := rc.Get(benchKey)
					u = *p
				}
				_ = u
			})
		})
	}
}

func BenchmarkL2Hit(b *testing.B) {
	ctx := context.Background()
	client := valkeytest.Shared(b).Client(b)
	tbl := warmTable(b, client, tables.Spec{TTL: time.Hour, L1TTL: tables.Off, EarlyRefreshBeta: tables.Off})
	b.ReportAllocs()
	for b.Loop() {
		u, err := tbl.Get(ctx, benchKey)
		if err != nil {
			b.Fatal(err)
		}
		sinkUser = u
	}
	require.Equal(b, benchUser(), sinkUser)
}

// BenchmarkRawGET is valkey-go's GET of the very row BenchmarkL2Hit reads, undecoded.
func BenchmarkRawGET(b *testing.B) {
	ctx := context.Background()
	client := valkeytest.Shared(b).Client(b)
	tbl := warmTable(b, client, tables.Spec{TTL: time.Hour, L1TTL: tables.Off})
	key := rowKey(b, tbl, benchKey)
	b.ReportAllocs()
	for b.Loop() {
		s, err := client.Do(ctx, client.B().Get().Key(key).Build()).ToString()
		if err != nil || len(s) == 0 {
			b.Fatal(err)
		}
	}
}

// BenchmarkL2Read compares the two ways of reading a row with its PTTL in one round trip:
// GET and PTTL pipelined (what the cache does) and a read script.
func BenchmarkL2Read(b *testing.B) {
	ctx := context.Background()
	client := valkeytest.Shared(b).Client(b)
	tbl := warmTable(b, client, tables.Spec{TTL: time.Hour, L1TTL: tables.Off})
	key := rowKey(b, tbl, benchKey)
	b.Run("pipeline", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			res := client.DoMulti(ctx, client.B().Get().Key(key).Build(), client.B().Pttl().Key(key).Build())
			if _, err := res[0].ToString(); err != nil {
				b.Fatal(err)
			}
			if _, err := res[1].AsInt64(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("script", func(b *testing.B) {
		script := valkey.NewLuaScriptReadOnly("return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1])}")
		b.ReportAllocs()
		for b.Loop() {
			arr, err := script.Exec(ctx, client, []string{key}, nil).ToArray()
			if err != nil || len(arr) != 2 {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDecode is the JSON decode an L2 hit pays and an L1 hit does not.
func BenchmarkDecode(b *testing.B) {
	data, _ := json.Marshal(benchUser())
	b.ReportAllocs()
	for b.Loop() {
		var u user
		if err := json.Unmarshal(data, &u); err != nil {
			b.Fatal(err)
		}
	}
}
