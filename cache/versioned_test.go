package cache_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/tables"
)

// rev is a value of a versioned table: Rev is its revision in the source of truth.
type rev struct {
	ID   string `json:"id"`
	Rev  uint64 `json:"rev"`
	Note string `json:"note,omitempty"`
}

func revOf(r rev) uint64 { return r.Rev }

// truth is a fake database of revisions: one counter per id, bumped by each commit.
type truth struct {
	ids  []string
	revs []atomic.Uint64
}

func newTruth(n int) *truth {
	tr := &truth{ids: make([]string, n), revs: make([]atomic.Uint64, n)}
	for i := range tr.ids {
		tr.ids[i] = fmt.Sprintf("id%02d", i)
	}
	return tr
}

func (tr *truth) load(_ context.Context, id string) (rev, error) {
	for i, x := range tr.ids {
		if x == id {
			return rev{ID: id, Rev: tr.revs[i].Load()}, nil
		}
	}
	return rev{}, cache.ErrNotFound
}

func versionedTable(t testing.TB, c *cache.Cache, name string, tr *truth) *cache.Table[string, rev] {
	t.Helper()
	tbl, err := cache.NewTable(c, tables.Spec{Name: name, TTL: time.Minute, DegradedLoads: tables.Off, L2Timeout: relaxedL2},
		tr.load, &cache.TableOpts[string, rev]{Version: revOf})
	require.NoError(t, err)
	return tbl
}

// l2Rev reads id's row and returns the revision its payload holds and its value version.
func l2Rev(t testing.TB, client valkey.Client, tbl *cache.Table[string, rev], id string) (payload, header uint64) {
	t.Helper()
	raw := readRaw(t, client, rowKey(t, tbl, id))
	require.NotEmpty(t, raw, "no row for %s", id)
	vv, ok := cache.ParsedValueVersion(raw)
	require.True(t, ok, "the row of %s is not a versioned value row", id)
	var r rev
	require.NoError(t, json.Unmarshal([]byte(cache.ParsedPayload(raw)), &r))
	return r.Rev, vv
}

// TestVersionedSet: an older Set is refused in L2 without a message, an equal one is written,
// and the writer reads the newer row back.
func TestVersionedSet(t *testing.T) {
	srv := valkeytest.Shared(t)
	client := srv.Client(t)
	tr := newTruth(1)
	name := tableName(t)
	tbl := versionedTable(t, newCache(t, client), name, tr)
	ctx := context.Background()
	id := tr.ids[0]
	require.Eventually(t, tbl.Synced, 5*time.Second, time.Millisecond)

	require.NoError(t, tbl.Set(ctx, id, rev{ID: id, Rev: 7}))
	p, h := l2Rev(t, client, tbl, id)
	require.Equal(t, [2]uint64{7, 7}, [2]uint64{p, h})
	sent := tbl.Stats().InvalidationsSent

	require.NoError(t, tbl.Set(ctx, id, rev{ID: id, Rev: 6}), "a refused Set is not an error")
	p, h = l2Rev(t, client, tbl, id)
	require.Equal(t, [2]uint64{7, 7}, [2]uint64{p, h}, "the older value must not replace the newer row")
	st := tbl.Stats()
	require.EqualValues(t, 1, st.SetsRefused)
	require.Equal(t, sent, st.InvalidationsSent, "a refused Set publishes nothing")
	got, err := tbl.Get(ctx, id)
	require.NoError(t, err)
	require.EqualValues(t, 7, got.Rev, "the writer reads the newer row back")

	require.NoError(t, tbl.Set(ctx, id, rev{ID: id, Rev: 7, Note: "again"}))
	raw := readRaw(t, client, rowKey(t, tbl, id))
	require.Contains(t, cache.ParsedPayload(raw), "again", "an equal version is written")
	require.EqualValues(t, 1, tbl.Stats().SetsRefused)

	// A fill carries the loaded value's version: an older Set after it is refused.
	require.NoError(t, tbl.Invalidate(ctx, id))
	tr.revs[0].Store(20)
	got, err = tbl.Get(ctx, id)
	require.NoError(t, err)
	require.EqualValues(t, 20, got.Rev)
	require.NoError(t, tbl.Set(ctx, id, rev{ID: id, Rev: 19}))
	p, h = l2Rev(t, client, tbl, id)
	require.Equal(t, [2]uint64{20, 20}, [2]uint64{p, h})
	require.EqualValues(t, 2, tbl.Stats().SetsRefused)

	// Against a row without a version (an unversioned writer's), a versioned Set writes.
	_, err = client.Do(ctx, client.B().Set().Key(rowKey(t, tbl, id)).
		Value(cache.ValueRow("AAAAAAAAAAAAAAAA", 0, 0, []byte(`{"id":"id00","rev":99}`))).Build()).ToString()
	require.NoError(t, err)
	require.NoError(t, tbl.Set(ctx, id, rev{ID: id, Rev: 21}))
	p, h = l2Rev(t, client, tbl, id)
	require.Equal(t, [2]uint64{21, 21}, [2]uint64{p, h})
}

// TestVersionedWritersConverge: two processes (two Caches over two clients) each make 10,000
// writes over 50 ids: commit (bump the id's revision in the truth), wait a random moment (up
// to 0.5 ms; one write in 50 stalls 5 to 20 ms), Set.
// The Sets reach L2 in another order than the commits, and a last round reverses the order
// for every id; afterwards L2 and both L1s hold the highest revision of every id.
func TestVersionedWritersConverge(t *testing.T) {
	// Each Cache's writes come from a few goroutines, as a service's would.
	const ids, writes, goroutines = 50, 10_000, 4
	srv := valkeytest.Shared(t)
	clients := []valkey.Client{srv.Client(t), srv.Client(t)}
	tr := newTruth(ids)
	name := tableName(t)
	tbls := make([]*cache.Table[string, rev], len(clients))
	for i, cl := range clients {
		tbls[i] = versionedTable(t, newCache(t, cl), name, tr)
	}
	for _, tbl := range tbls {
		require.Eventually(t, tbl.Synced, 5*time.Second, time.Millisecond)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	var reordered atomic.Int64 // Sets that reached cache_set after a later commit of their id
	for w, tbl := range tbls {
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(w), uint64(g)))
				for range writes / goroutines {
					i := rng.IntN(ids)
					v := tr.revs[i].Add(1) // the commit
					d := time.Duration(rng.IntN(500)) * time.Microsecond
					if rng.IntN(50) == 0 { // now and then a writer stalls: overtaken many times
						d = time.Duration(5+rng.IntN(15)) * time.Millisecond
					}
					time.Sleep(d)
					if tr.revs[i].Load() != v {
						reordered.Add(1)
					}
					if err := tbl.Set(ctx, tr.ids[i], rev{ID: tr.ids[i], Rev: v}); err != nil {
						t.Error(err)
						return
					}
					if rng.IntN(4) == 0 { // reads keep L1 entries and fills in play
						if _, err := tbl.Get(ctx, tr.ids[rng.IntN(ids)]); err != nil {
							t.Error(err)
							return
						}
					}
				}
			}()
		}
	}
	wg.Wait()
	require.False(t, t.Failed())
	// A last round that reverses the order for every id: cache 0 commits, cache 1 commits and
	// Sets, then cache 0 Sets its older revision.
	for i, id := range tr.ids {
		older, newer := tr.revs[i].Add(1), tr.revs[i].Add(1)
		require.NoError(t, tbls[1].Set(ctx, id, rev{ID: id, Rev: newer}))
		require.NoError(t, tbls[0].Set(ctx, id, rev{ID: id, Rev: older}))
		reordered.Add(1)
	}

	stale := 0
	for i, id := range tr.ids {
		want := tr.revs[i].Load()
		p, h := l2Rev(t, clients[0], tbls[0], id)
		if p != want || h != want {
			stale++
			t.Errorf("L2 row of %s holds revision %d (header %d), the truth is %d", id, p, h, want)
		}
	}
	for k, tbl := range tbls {
		require.Eventually(t, func() bool {
			for i, id := range tr.ids {
				if v, ok := cache.PeekL1(tbl, id); ok && v.Rev != tr.revs[i].Load() {
					return false
				}
			}
			return true
		}, 5*time.Second, 10*time.Millisecond, "cache %d's L1 holds an older revision", k)
		for i, id := range tr.ids {
			got, err := tbl.Get(ctx, id)
			require.NoError(t, err)
			require.Equal(t, tr.revs[i].Load(), got.Rev, "cache %d: Get(%s)", k, id)
			v, ok := cache.PeekL1(tbl, id)
			require.True(t, !ok || v.Rev == tr.revs[i].Load(), "cache %d: L1 of %s", k, id)
		}
	}
	refused := tbls[0].Stats().SetsRefused + tbls[1].Stats().SetsRefused
	t.Logf("%d writes, %d Sets reached L2 after a later commit of their id, %d refused, %d stale rows",
		2*writes, reordered.Load(), refused, stale)
	require.Positive(t, reordered.Load(), "the test must reorder writers")
}
