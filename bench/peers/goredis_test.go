package peers

import (
	"context"
	"testing"
	"time"

	"github.com/go-redis/cache/v9"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bench"
	"github.com/echocache/echocache/internal/valkeytest"
)

// goRedisCache returns a go-redis/cache over a go-redis v9 client of the
// shared server, with a TinyLFU local cache when local is set, and the row
// SampleRow(rowID) stored under key (in Valkey, and locally when local).
func goRedisCache(b *testing.B, key string, local bool) *cache.Cache {
	b.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: valkeytest.Shared(b).Addr})
	b.Cleanup(func() { _ = rdb.Close() })
	opts := &cache.Options{Redis: rdb}
	if local {
		opts.LocalCache = cache.NewTinyLFU(1000, time.Hour)
		// Stats count only Gets that reach Valkey: the local-hit benchmark
		// checks that none did.
		opts.StatsEnabled = true
	}
	c := cache.New(opts)
	ctx := context.Background()
	row := bench.SampleRow(rowID)
	require.NoError(b, c.Set(&cache.Item{Ctx: ctx, Key: key, Value: &row, TTL: time.Hour}))
	var got bench.Row
	require.NoError(b, c.Get(ctx, key, &got))
	require.Equal(b, row, got)
	return c
}

// BenchmarkGoRedisCacheLocalHit is go-redis/cache v9's local hit: Get of a
// row held in its TinyLFU local cache, which keeps the msgpack bytes and
// decodes them on every hit.
func BenchmarkGoRedisCacheLocalHit(b *testing.B) {
	ctx := context.Background()
	key := rowKey(b, rowID)
	c := goRedisCache(b, key, true)
	hits0 := c.Stats().Hits
	b.ReportAllocs()
	var row bench.Row
	for b.Loop() {
		if err := c.Get(ctx, key, &row); err != nil {
			b.Fatal(err)
		}
	}
	// Hits counts only Gets answered by Valkey: none may have been.
	require.Equal(b, hits0, c.Stats().Hits, "some Gets were not local hits")
}

// BenchmarkGoRedisCacheRemoteHit is go-redis/cache v9's remote hit: Get with
// no local cache, so each op is a GET to Valkey and a msgpack decode.
func BenchmarkGoRedisCacheRemoteHit(b *testing.B) {
	ctx := context.Background()
	key := rowKey(b, rowID)
	c := goRedisCache(b, key, false)
	b.ReportAllocs()
	var row bench.Row
	for b.Loop() {
		if err := c.Get(ctx, key, &row); err != nil {
			b.Fatal(err)
		}
	}
}
