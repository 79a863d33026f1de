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
	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/tables"
)

// TestGetThreeTiers walks one id through the tiers: the loader fills, L1 answers, and once L1
// is dropped L2 answers before the loader is consulted again (seed 004).
func TestGetThreeTiers(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, client valkey.Client) {
		ctx := context.Background()
		src := &source{}
		tbl := newTable(t, newCache(t, client), tables.Spec{L2Timeout: relaxedL2}, src)

		u, err := tbl.Get(ctx, "42")
		require.NoError(t, err)
		require.Equal(t, user{ID: "42", Name: "name-42"}, u)
		require.Equal(t, int64(1), src.calls.Load())
		require.Equal(t, "value", cache.ParsedKind(readRaw(t, client, rowKey(t, tbl, "42"))))

		_, err = tbl.Get(ctx, "42")
		require.NoError(t, err)
		st := tbl.Stats()
		require.Equal(t, int64(1), st.L1Hits)
		require.Equal(t, int64(0), st.L2Hits)

		for _, drop := range []struct {
			name string
			drop func()
		}{
			{"ForgetAll", tbl.ForgetAll},
			{"Forget", func() { tbl.Forget("42") }},
		} {
			before := tbl.Stats()
			drop.drop()
			u, err = tbl.Get(ctx, "42")
			require.NoError(t, err, drop.name)
			require.Equal(t, "name-42", u.Name)
			after := tbl.Stats()
			require.Equal(t, before.L2Hits+1, after.L2Hits, "%s: the next Get is an L2 hit", drop.name)
			require.Equal(t, before.L1Hits, after.L1Hits, drop.name)
			require.Equal(t, int64(1), src.calls.Load(), "%s: the loader is not called", drop.name)
			_, err = tbl.Get(ctx, "42")
			require.NoError(t, err)
			require.Equal(t, after.L1Hits+1, tbl.Stats().L1Hits, "%s: the L2 read refilled L1", drop.name)
		}
		require.Equal(t, int64(1), tbl.Stats().Loads)
	})
}

// TestFillPTTL is seed 004's "PTTL 300 of 300": with jitter off a fresh row has at most 300
// and more than 250 ms left; with jitter 0.1, 1,000 fills spread over 270 to 300 ms.
func TestFillPTTL(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, client valkey.Client) {
		ctx := context.Background()
		c := newCache(t, client)

		exact := newTable(t, c, tables.Spec{L2Timeout: relaxedL2, Name: tableName(t) + "0", TTL: 300 * time.Millisecond, Jitter: tables.Off}, &source{})
		start := time.Now()
		_, err := exact.Get(ctx, "seed")
		require.NoError(t, err)
		p := pttlOf(t, client, rowKey(t, exact, "seed"))
		elapsed := time.Since(start).Milliseconds() + 1
		require.LessOrEqual(t, p, int64(300))
		// Written with PX 300 somewhere in [start, now]: above 250 unless the machine stalled
		// this test for 50 ms, and never below what the elapsed time explains.
		require.GreaterOrEqual(t, p+elapsed, int64(300), "PTTL %d, %d ms after the fill began", p, elapsed)
		if elapsed < 50 {
			require.Greater(t, p, int64(250))
		}

		jit := newTable(t, c, tables.Spec{L2Timeout: relaxedL2, Name: tableName(t) + "1", TTL: 300 * time.Millisecond, Jitter: 0.1}, &source{})
		const fills = 1000
		var buckets [3]int // PX estimated in 270-279, 280-289, 290-300
		lo, hi := int64(300), int64(0)
		for i := range fills {
			id := strconv.Itoa(i)
			start := time.Now()
			_, err := jit.Get(ctx, id)
			require.NoError(t, err)
			p := pttlOf(t, client, rowKey(t, jit, id))
			elapsed := time.Since(start).Milliseconds() + 1
			// The row was written somewhere in [start, now], so its PX lies in [p, p+elapsed].
			require.LessOrEqual(t, p, int64(300), "fill %d", i)
			require.GreaterOrEqual(t, p+elapsed, int64(270), "fill %d: PTTL %d, %d ms after the fill began", i, p, elapsed)
			lo, hi = min(lo, p), max(hi, p+elapsed)
			buckets[min(max(p+elapsed/2-270, 0)/10, 2)]++
		}
		require.Less(t, lo, int64(276), "the shortest rows come near TTL*(1-0.1)")
		require.Greater(t, hi, int64(294), "the longest rows come near TTL")
		for _, n := range buckets {
			require.Greater(t, n, 150, "a third of the range holds %d of %d fills: the jitter is not uniform: %v", n, fills, buckets)
		}
	})
}

// TestSingleFlightGoroutines: 1,000 goroutines miss one id at once; the loader runs once and
// every goroutine gets the value.
func TestSingleFlightGoroutines(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, client valkey.Client) {
		src := &source{delay: 100 * time.Millisecond}
		tbl := newTable(t, newCache(t, client), tables.Spec{L2Timeout: relaxedL2}, src)
		const n = 1000
		start := make(chan struct{})
		var wg sync.WaitGroup
		errs := make([]error, n)
		got := make([]user, n)
		for i := range n {
			wg.Go(func() {
				<-start
				got[i], errs[i] = tbl.Get(context.Background(), "hot")
			})
		}
		close(start)
		wg.Wait()
		for i := range n {
			require.NoError(t, errs[i], "goroutine %d", i)
			require.Equal(t, user{ID: "hot", Name: "name-hot"}, got[i], "goroutine %d", i)
		}
		require.Equal(t, int64(1), src.calls.Load(), "the loader runs once")
		require.Equal(t, int64(1), tbl.Stats().Loads)
	})
}

// TestNegativeCaching: ErrNotFound from the loader is a not-found row with the negative TTL;
// Get answers ErrNotFound without the loader until the row expires.
func TestNegativeCaching(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, client valkey.Client) {
		ctx := context.Background()
		src := &source{gone: map[string]bool{"ghost": true}}
		tbl := newTable(t, newCache(t, client), tables.Spec{L2Timeout: relaxedL2, NegativeTTL: time.Second}, src)
		key := rowKey(t, tbl, "ghost")

		_, err := tbl.Get(ctx, "ghost")
		require.ErrorIs(t, err, cache.ErrNotFound)
		require.Equal(t, "notfound", cache.ParsedKind(readRaw(t, client, key)))
		p := pttlOf(t, client, key)
		require.LessOrEqual(t, p, int64(1000), "the not-found row lives NegativeTTL (minus jitter)")
		require.Greater(t, p, int64(500), "not the default NegativeTTL of 30 s, nor a row about to go")

		_, err = tbl.Get(ctx, "ghost") // L1
		require.ErrorIs(t, err, cache.ErrNotFound)
		tbl.ForgetAll()
		_, err = tbl.Get(ctx, "ghost") // L2
		require.ErrorIs(t, err, cache.ErrNotFound)
		st := tbl.Stats()
		require.Equal(t, int64(1), st.L1Hits)
		require.Equal(t, int64(1), st.L2Hits)
		require.Equal(t, int64(1), src.calls.Load(), "no loader call while the not-found row lives")
		require.Zero(t, st.LoadErrors, "not found is an answer, not a failure")

		valkeytest.Eventually(t, 5*time.Second, "the not-found row to expire", func() bool { return pttlOf(t, client, key) == -2 })
		_, err = tbl.Get(ctx, "ghost")
		require.ErrorIs(t, err, cache.ErrNotFound)
		require.Equal(t, int64(2), src.calls.Load(), "the loader is asked again once the row expired")

		t.Run("off", func(t *testing.T) {
			src := &source{gone: map[string]bool{"ghost": true}}
			tbl := newTable(t, newCache(t, client), tables.Spec{L2Timeout: relaxedL2, NegativeTTL: tables.Off}, src)
			for i := 1; i <= 3; i++ {
				_, err := tbl.Get(ctx, "ghost")
				require.ErrorIs(t, err, cache.ErrNotFound)
				require.Equal(t, int64(i), src.calls.Load())
				require.Empty(t, readRaw(t, client, rowKey(t, tbl, "ghost")), "no row, and the lease is released")
			}
		})
	})
}

// TestCorruptRow: a row this version cannot read is a counted miss: reloaded, replaced by a
// fresh row, never a panic.
func TestCorruptRow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, row string }{
		{"garbage", "\x00\xff garbage \x13"},
		{"empty", ""},
		{"plain json", `{"id":"x","name":"from another writer"}`},
		{"other format version", "\xec\x02V0123456789abcdef\x00\x00\x00\x01\x00\x00\x01\xa3\x00\x00\x00\x00{}"},
		{"unknown kind", "\xec\x01Z0123456789abcdef\x00\x00\x00\x01\x00\x00\x01\xa3\x00\x00\x00\x00"},
		{"short value header", "\xec\x01V0123456789abcdef\x00\x00\x00\x01\x00\x01"},
		{"value payload not json", "\xec\x01V0123456789abcdef\x00\x00\x00\x01\x00\x00\x01\xa3\x00\x00\x00\x00{not json"},
		{"lease with a short token", "\xec\x01Lshort"},
		{"not found with a payload", "\xec\x01N\x00\x00\x00\x01xx"},
		{"refresh claim cut short", "\xec\x01R0123456789"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			eachTarget(t, func(t *testing.T, client valkey.Client) {
				ctx := context.Background()
				src := &source{}
				tbl := newTable(t, newCache(t, client), tables.Spec{L2Timeout: relaxedL2}, src)
				key := rowKey(t, tbl, "x")
				require.NoError(t, client.Do(ctx, client.B().Set().Key(key).Value(tc.row).Px(time.Minute).Build()).Error())

				u, err := tbl.Get(ctx, "x")
				require.NoError(t, err)
				require.Equal(t, "name-x", u.Name)
				require.Equal(t, int64(1), src.calls.Load())
				st := tbl.Stats()
				require.Equal(t, int64(1), st.CorruptRows)
				require.Zero(t, st.L2Hits)
				raw := readRaw(t, client, key)
				require.Equal(t, "value", cache.ParsedKind(raw), "the row was replaced by a fresh fill")
				require.JSONEq(t, `{"id":"x","name":"name-x"}`, cache.ParsedPayload(raw))
			})
		})
	}
}

// TestIDTypes: integer and named id types make the expected row keys and round-trip.
func TestIDTypes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := targets[0].client(t)
	c := newCache(t, client)

	type userID int64
	ints, err := cache.NewTable(c, tables.Spec{L2Timeout: relaxedL2, Name: tableName(t) + "i"}, func(_ context.Context, id userID) (int64, error) {
		return int64(id) * 2, nil
	}, nil)
	require.NoError(t, err)
	for _, id := range []userID{0, 42, -7, 1 << 62} {
		v, err := ints.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, int64(id)*2, v)
		require.Equal(t, "value", cache.ParsedKind(readRaw(t, client, rowKey(t, ints, strconv.FormatInt(int64(id), 10)))))
	}

	type sku string
	strs, err := cache.NewTable(c, tables.Spec{L2Timeout: relaxedL2, Name: tableName(t) + "s"}, func(_ context.Context, id sku) (string, error) {
		return "item " + string(id), nil
	}, nil)
	require.NoError(t, err)
	v, err := strs.Get(ctx, "a b:c{d}")
	require.NoError(t, err)
	require.Equal(t, "item a b:c{d}", v)
	require.Equal(t, "value", cache.ParsedKind(readRaw(t, client, rowKey(t, strs, "a b:c{d}"))))

	for _, bad := range []sku{"", "tab\there"} {
		_, err := strs.Get(ctx, bad)
		require.ErrorIs(t, err, keys.ErrInvalid, "id %q", bad)
	}
}

// TestNoL1ReadsBareGET: a table without L1 reads a row far from expiry with a bare GET (its
// PTTL serves only L1 deadlines and, near expiry, early refresh) and still answers from L2.
func TestNoL1ReadsBareGET(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, raw valkey.Client) {
		ctx := context.Background()
		client := &countingClient{Client: raw}
		src := &source{delay: time.Millisecond}
		tbl := newTable(t, newCache(t, client), tables.Spec{L2Timeout: relaxedL2, TTL: time.Hour, L1TTL: tables.Off}, src)
		_, err := tbl.Get(ctx, "k")
		require.NoError(t, err)
		client.reset()
		for range 5 {
			u, err := tbl.Get(ctx, "k")
			require.NoError(t, err)
			require.Equal(t, "name-k", u.Name)
		}
		require.Equal(t, int64(5), tbl.Stats().L2Hits)
		require.Equal(t, int64(1), src.calls.Load())
		trips, _ := client.tripsWith("SET")
		require.Equal(t, 5, trips, "one SET NX GET per read, which writes nothing over a row")
		trips, _ = client.tripsWith("PTTL")
		require.Zero(t, trips, "no PTTL for a row with an hour to live")
	})
}
