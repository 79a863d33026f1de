package peers

import (
	"context"
	"testing"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/bench"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// getSide is the raw valkey-go GET of the core module's BenchmarkValkeyGet as
// a bench.Compare side, so a peer is divided by a baseline measured in the
// same milliseconds.
func getSide(b *testing.B) bench.Side {
	b.Helper()
	ctx := context.Background()
	c := valkeytest.Shared(b).Client(b)
	key := rowKey(b, rowID)
	require.NoError(b, c.Do(ctx, c.B().Set().Key(key).Value(valkey.BinaryString(bench.SampleRowJSON(rowID))).Build()).Error())
	return bench.Side{Name: "get", Op: func(b *testing.B) {
		if _, err := c.Do(ctx, c.B().Get().Key(key).Build()).AsBytes(); err != nil {
			b.Fatal(err)
		}
	}}
}

// BenchmarkCompareGoRedisRemote is go-redis/cache's remote hit (GET and
// msgpack decode) interleaved with a raw valkey-go GET of the same size.
func BenchmarkCompareGoRedisRemote(b *testing.B) {
	ctx := context.Background()
	key := rowKey(b, rowID)
	c := goRedisCache(b, key, false)
	get := getSide(b)
	b.ReportAllocs()
	var row bench.Row
	bench.Compare(b, bench.Side{Name: "goredis", Op: func(b *testing.B) {
		if err := c.Get(ctx, key, &row); err != nil {
			b.Fatal(err)
		}
	}}, get)
}

// BenchmarkCompareAsynqEnqueue is asynq's Client.Enqueue interleaved with a
// raw valkey-go GET: how many round trips' worth one enqueue costs.
func BenchmarkCompareAsynqEnqueue(b *testing.B) {
	c := asynq.NewClient(asynqOpt(b))
	b.Cleanup(func() { _ = c.Close() })
	q := asynq.Queue(bench.UniqueName(b.Name()))
	get := getSide(b)
	b.ReportAllocs()
	bench.Compare(b, bench.Side{Name: "asynq", Op: func(b *testing.B) {
		if _, err := c.Enqueue(asynq.NewTask("noop", jobPayload), q); err != nil {
			b.Fatal(err)
		}
	}}, get)
}

// BenchmarkCompareCSCPubSub is valkey-go's client-side caching invalidation
// against a raw SPUBLISH→receive round trip, alternating op by op, so the
// ratio of their percentiles holds on a noisy machine.
func BenchmarkCompareCSCPubSub(b *testing.B) {
	srv := valkeytest.Shared(b)
	writer := srv.Client(b)
	csc, check := cscInvalidation(b, writer)
	t, err := keys.NewTable(bench.UniqueName(b.Name()))
	require.NoError(b, err)
	pubsub := bench.PubSubRoundTrip(b, writer, srv.Client(b), t.Inval())
	b.ReportAllocs()
	bench.CompareLatency(b, csc, pubsub)
	check()
}
