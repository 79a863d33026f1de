package bench

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/tables"
)

// InvalidationSide returns EchoCache's invalidation propagation as a [LatencySide] named
// "invalidation": each op Invalidates one id through a writer's cache and returns the time
// until a reader's cache has applied the message (its L1 dropped the id). Writer and reader
// are two caches over the two clients, as two processes would be, on table name. The reader
// signals a channel from its Config.OnInvalidation, exactly as [PubSubRoundTrip]'s raw
// Receive callback does, so both sides of a ratio wait on the same notification. Before each
// op, untimed, the reader reads the id into its L1. The caches
// close on b.Cleanup. The bench/peers module divides it by valkey-go's client-side caching.
func InvalidationSide(b *testing.B, writerClient, readerClient valkey.Client, name string) LatencySide {
	b.Helper()
	const id = 42
	newTable := func(client valkey.Client, cfg cache.Config) *cache.Table[int64, Row] {
		c, err := cache.New(client, cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(c.Close)
		t, err := cache.NewTable(c, tables.Spec{Name: name}, func(_ context.Context, id int64) (Row, error) { return SampleRow(id), nil }, nil)
		if err != nil {
			b.Fatal(err)
		}
		return t
	}
	got := make(chan struct{}, 1)
	writer := newTable(writerClient, cache.Config{})
	reader := newTable(readerClient, cache.Config{OnInvalidation: func(_ string, ids []string) {
		if len(ids) == 1 && ids[0] == strconv.Itoa(id) {
			select {
			case got <- struct{}{}:
			default: // one invalidation in flight at a time
			}
		}
	}})
	ctx := context.Background()
	wait := time.NewTimer(pubSubWait)
	wait.Stop()
	return LatencySide{Name: "invalidation", Op: func(b *testing.B) time.Duration {
		// Untimed: the reader holds the id in L1, so the message's drop is a real one (as
		// valkey-go's client-side caching side re-reads its key before each op); without
		// it the reader's Forget finds nothing to delete.
		if _, err := reader.Get(ctx, id); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := writer.Invalidate(ctx, id); err != nil {
			b.Fatal(err)
		}
		wait.Reset(pubSubWait)
		select {
		case <-got:
		case <-wait.C:
			b.Fatal("invalidation not received")
		}
		d := time.Since(start)
		wait.Stop()
		return d
	}}
}
