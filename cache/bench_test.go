package cache_test

import (
	"context"
	"encoding/json"
	"sync"
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

// BenchmarkL2Read compares, paired, the ways of reading a row with its PTTL in one round trip
// (GET and PTTL pipelined with DoMulti, what the cache does; a read script) with a bare GET.
func BenchmarkL2Read(b *testing.B) {
	ctx := context.Background()
	client := valkeytest.Shared(b).Client(b)
	tbl := warmTable(b, client, tables.Spec{TTL: time.Hour, L1TTL: tables.Off})
	key := rowKey(b, tbl, benchKey)
	script := valkey.NewLuaScriptReadOnly("return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1])}")
	variants := []struct {
		name string
		read func() error
	}{
		{"get", func() error { return client.Do(ctx, client.B().Get().Key(key).Build()).Error() }},
		{"pipeline", func() error {
			res := client.DoMulti(ctx, client.B().Get().Key(key).Build(), client.B().Pttl().Key(key).Build())
			if err := res[0].Error(); err != nil {
				return err
			}
			return res[1].Error()
		}},
		{"script", func() error { return script.Exec(ctx, client, []string{key}, nil).Error() }},
	}
	const round = 20
	total := make([]time.Duration, len(variants))
	var n int
	for b.Loop() {
		for i, v := range variants {
			start := time.Now()
			for range round {
				if err := v.read(); err != nil {
					b.Fatal(err)
				}
			}
			total[i] += time.Since(start)
		}
		n += round
	}
	for i, v := range variants {
		b.ReportMetric(float64(total[i])/float64(n), "ns/"+v.name)
	}
	b.ReportMetric(float64(total[1])/float64(total[0]), "x-pipeline")
	b.ReportMetric(float64(total[2])/float64(total[0]), "x-script")
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

// The paired benchmarks below alternate EchoCache and its baseline in short rounds inside
// one benchmark and report both, and their ratio, as metrics: on a shared, noisy machine
// that keeps load changes out of the ratio, which separate benchmarks run minutes apart do
// not. ns/op is the cost of one round of both and means nothing by itself.

// BenchmarkL1HitVsRistretto: an L1 hit through Table.Get against ristretto's Get of the same
// key holding the same value, stored without a TTL (EchoCache keeps its own deadlines) and
// with one (what a ristretto L1 with expiry pays: ristretto reads the clock on every Get).
func BenchmarkL1HitVsRistretto(b *testing.B) {
	ctx := context.Background()
	tbl := warmTable(b, valkeytest.Shared(b).Client(b), tables.Spec{TTL: time.Hour, L1TTL: time.Hour})
	plain, withTTL := rawRistretto(b, 0), rawRistretto(b, time.Hour)
	const round = 2000
	var ours, raw, rawTTL time.Duration
	var n int
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		for range round {
			sinkUser, _ = tbl.Get(ctx, benchKey)
		}
		mid := time.Now()
		for range round {
			p, _ := plain.Get(benchKey)
			sinkUser = *p
		}
		mid2 := time.Now()
		for range round {
			p, _ := withTTL.Get(benchKey)
			sinkUser = *p
		}
		end := time.Now()
		ours, raw, rawTTL = ours+mid.Sub(start), raw+mid2.Sub(mid), rawTTL+end.Sub(mid2)
		n += round
	}
	b.ReportMetric(float64(ours)/float64(n), "ns/hit")
	b.ReportMetric(float64(raw)/float64(n), "ns/ristretto")
	b.ReportMetric(float64(rawTTL)/float64(n), "ns/ristretto-ttl")
	b.ReportMetric(float64(ours)/float64(raw), "x-ristretto")
	b.ReportMetric(float64(ours)/float64(rawTTL), "x-ristretto-ttl")
}

// BenchmarkL2HitVsGET: an L2 hit through Table.Get with L1 off (header check and JSON decode
// included) against valkey-go's GET of the same row, bare and followed by the same JSON
// decode (what no cache can skip: the baseline returns bytes, Get a value). With early
// refresh off the cache sends a bare GET; with it on (the default) it pipelines PTTL behind
// the GET, for XFetch.
func BenchmarkL2HitVsGET(b *testing.B) {
	for _, tc := range []struct {
		name string
		beta float64
	}{{"refresh-off", tables.Off}, {"refresh-on", 0}} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			client := valkeytest.Shared(b).Client(b)
			tbl := warmTable(b, client, tables.Spec{TTL: time.Hour, L1TTL: tables.Off, EarlyRefreshBeta: tc.beta})
			key := rowKey(b, tbl, benchKey)
			const round = 20
			const headerLen = 3 + 16 + 4 // see cache/row.go
			var ours, raw, rawDecode time.Duration
			var n int
			b.ReportAllocs()
			for b.Loop() {
				start := time.Now()
				for range round {
					u, err := tbl.Get(ctx, benchKey)
					if err != nil {
						b.Fatal(err)
					}
					sinkUser = u
				}
				mid := time.Now()
				for range round {
					if _, err := client.Do(ctx, client.B().Get().Key(key).Build()).ToString(); err != nil {
						b.Fatal(err)
					}
				}
				mid2 := time.Now()
				for range round {
					s, err := client.Do(ctx, client.B().Get().Key(key).Build()).ToString()
					if err != nil {
						b.Fatal(err)
					}
					if err := json.Unmarshal([]byte(s[headerLen:]), &sinkUser); err != nil {
						b.Fatal(err)
					}
				}
				end := time.Now()
				ours, raw, rawDecode = ours+mid.Sub(start), raw+mid2.Sub(mid), rawDecode+end.Sub(mid2)
				n += round
			}
			b.ReportMetric(float64(ours)/float64(n), "ns/l2hit")
			b.ReportMetric(float64(raw)/float64(n), "ns/get")
			b.ReportMetric(float64(rawDecode)/float64(n), "ns/get+decode")
			b.ReportMetric(float64(ours)/float64(raw), "x-get")
			b.ReportMetric(float64(ours)/float64(rawDecode), "x-get+decode")
		})
	}
}

// BenchmarkL1HitVsRistrettoParallel is BenchmarkL1HitVsRistretto with GOMAXPROCS goroutines
// (b.RunParallel) hitting one key together; each goroutine alternates the rounds, and the
// metrics are per hit, per goroutine. Run with -cpu 1,2,... to see hits scale.
func BenchmarkL1HitVsRistrettoParallel(b *testing.B) {
	ctx := context.Background()
	tbl := warmTable(b, valkeytest.Shared(b).Client(b), tables.Spec{TTL: time.Hour, L1TTL: time.Hour})
	plain := rawRistretto(b, 0)
	const round = 1000
	var mu sync.Mutex
	var ours, raw time.Duration
	var n int
	b.RunParallel(func(pb *testing.PB) {
		var o, r time.Duration
		var k int
		var u user
		for pb.Next() {
			start := time.Now()
			for range round {
				u, _ = tbl.Get(ctx, benchKey)
			}
			mid := time.Now()
			for range round {
				p, _ := plain.Get(benchKey)
				u = *p
			}
			o, r, k = o+mid.Sub(start), r+time.Since(mid), k+round
		}
		_ = u
		mu.Lock()
		ours, raw, n = ours+o, raw+r, n+k
		mu.Unlock()
	})
	b.ReportMetric(float64(ours)/float64(n), "ns/hit")
	b.ReportMetric(float64(raw)/float64(n), "ns/ristretto")
	b.ReportMetric(float64(ours)/float64(raw), "x-ristretto")
}
