package cache_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/tables"
)

// db is a source of truth whose values carry a version per id.
type db struct {
	mu sync.Mutex
	v  map[string]int
}

func newDB() *db { return &db{v: map[string]int{}} }

func (d *db) load(_ context.Context, id string) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.v[id], nil
}

func (d *db) bump(id string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.v[id]++
	return d.v[id]
}

// coherentPair is two caches over two clients (two "processes") with one table each over
// the same source.
func coherentPair(t *testing.T, client func() valkey.Client, cfg cache.Config, spec tables.Spec, src *db) (a, b *cache.Table[string, int], ca, cb *cache.Cache) {
	t.Helper()
	if spec.Name == "" {
		spec.Name = tableName(t)
	}
	mk := func() (*cache.Table[string, int], *cache.Cache) {
		c, err := cache.New(client(), cfg)
		require.NoError(t, err)
		t.Cleanup(c.Close)
		tbl, err := cache.NewTable(c, spec, src.load, nil)
		require.NoError(t, err)
		require.True(t, tbl.Synced(), "NewTable waits for the subscription")
		return tbl, c
	}
	a, ca = mk()
	b, cb = mk()
	return a, b, ca, cb
}

func TestWritePath(t *testing.T) {
	t.Parallel()
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			src := newDB()
			a, b, _, _ := coherentPair(t, func() valkey.Client { return tg.client(t) }, cache.Config{ReconcileInterval: time.Minute}, tables.Spec{L2Timeout: relaxedL2, DegradedLoads: tables.Off}, src)
			for _, tbl := range []*cache.Table[string, int]{a, b} {
				v, err := tbl.Get(ctx, "k")
				require.NoError(t, err)
				require.Equal(t, 0, v)
				v, err = tbl.Get(ctx, "k")
				require.NoError(t, err)
				require.Equal(t, 0, v)
			}
			require.Equal(t, int64(1), b.Stats().L1Hits)

			// Set: write-through; the writer reads its own write, the other follows.
			require.NoError(t, a.Set(ctx, "k", 7))
			v, err := a.Get(ctx, "k")
			require.NoError(t, err)
			require.Equal(t, 7, v, "read-your-own-writes")
			valkeytest.Eventually(t, 10*time.Second, "b to see the Set", func() bool {
				v, err := b.Get(ctx, "k")
				require.NoError(t, err)
				return v == 7
			})

			// Invalidate: the rows go, the next Get loads the source.
			src.bump("k")
			src.bump("j")
			require.NoError(t, b.Invalidate(ctx, "k", "j"))
			v, err = b.Get(ctx, "k")
			require.NoError(t, err)
			require.Equal(t, 1, v)
			valkeytest.Eventually(t, 10*time.Second, "a to see the Invalidate", func() bool {
				v, err := a.Get(ctx, "k")
				require.NoError(t, err)
				return v == 1
			})

			// InvalidateAll: every row deleted, a new epoch, both L1s flushed.
			for i := range 50 {
				_, err := a.Get(ctx, "m"+strconv.Itoa(i))
				require.NoError(t, err)
				_, err = b.Get(ctx, "m"+strconv.Itoa(i))
				require.NoError(t, err)
			}
			for i := range 50 {
				src.bump("m" + strconv.Itoa(i))
			}
			flushesBefore := b.Stats().Flushes
			require.NoError(t, a.InvalidateAll(ctx))
			for i := range 50 {
				require.Empty(t, readRaw(t, tg.client(t), rowKey(t, a, "m"+strconv.Itoa(i))), "rows deleted")
			}
			valkeytest.Eventually(t, 10*time.Second, "b to flush on the new epoch", func() bool { return b.Stats().Flushes > flushesBefore })
			for i := range 50 {
				v, err := b.Get(ctx, "m"+strconv.Itoa(i))
				require.NoError(t, err)
				require.Equal(t, 1, v)
			}
			sa, sb := a.Stats(), b.Stats()
			require.Equal(t, int64(2), sa.InvalidationsSent, "Set and InvalidateAll")
			require.Equal(t, int64(1), sb.InvalidationsSent)
			valkeytest.Eventually(t, 10*time.Second, "every message received", func() bool {
				return a.Stats().InvalidationsReceived == 3 && b.Stats().InvalidationsReceived == 3
			})
			require.Zero(t, b.Stats().Gaps)
			require.Equal(t, flushesBefore+1, b.Stats().Flushes, "one flush: the epoch change")
			require.Positive(t, b.Stats().PropagationCount)
		})
	}
}

// TestNoSpuriousFlush: 100 warm keys, no writes, two reconcile intervals: 100/100 L1 hits.
func TestNoSpuriousFlush(t *testing.T) {
	t.Parallel()
	const interval = 200 * time.Millisecond
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			src := newDB()
			a, b, _, _ := coherentPair(t, func() valkey.Client { return tg.client(t) }, cache.Config{ReconcileInterval: interval}, tables.Spec{L2Timeout: relaxedL2, DegradedLoads: tables.Off}, src)
			require.NoError(t, a.Set(ctx, "seed", 1)) // the record exists
			valkeytest.Eventually(t, 10*time.Second, "b to receive the seed", func() bool { return b.Stats().InvalidationsReceived == 1 })
			for i := range 100 {
				_, err := b.Get(ctx, strconv.Itoa(i))
				require.NoError(t, err)
			}
			before := b.Stats()
			valkeytest.Eventually(t, 20*time.Second, "two reconciles", func() bool { return b.Stats().Reconciles >= before.Reconciles+2 })
			for i := range 100 {
				_, err := b.Get(ctx, strconv.Itoa(i))
				require.NoError(t, err)
			}
			after := b.Stats()
			require.Equal(t, int64(100), after.L1Hits-before.L1Hits, "100/100 L1 hits")
			require.Zero(t, after.Flushes)
		})
	}
}
