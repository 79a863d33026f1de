package cache_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
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

// blockingSource is a loader that parks every call until released, so tests can act while
// a load is in flight.
type blockingSource struct {
	started chan string
	release chan struct{}
	calls   atomicCounter
}

type atomicCounter struct {
	mu sync.Mutex
	n  int
}

func (c *atomicCounter) inc() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	return c.n
}

func (c *atomicCounter) get() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func newBlocking() *blockingSource {
	return &blockingSource{started: make(chan string, 16), release: make(chan struct{})}
}

func (b *blockingSource) load(ctx context.Context, id string) (user, error) {
	b.calls.inc()
	b.started <- id
	select {
	case <-b.release:
		return user{ID: id, Name: "name-" + id}, nil
	case <-ctx.Done():
		return user{}, ctx.Err()
	}
}

// TestLoaderTimeout: a loader that runs past LoaderTimeout fails every caller waiting on it
// with an error matching ErrLoaderTimeout; other ids are served meanwhile; nothing is cached
// and the lease is released, so the next Get tries again.
func TestLoaderTimeout(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, client valkey.Client) {
		ctx := context.Background()
		var slowCalls atomicCounter
		joined := make(chan struct{})
		load := func(ctx context.Context, id string) (user, error) {
			if id == "slow" {
				slowCalls.inc()
				<-joined
				<-ctx.Done() // honours its context, as loaders should
				return user{}, ctx.Err()
			}
			return user{ID: id}, nil
		}
		tbl, err := cache.NewTable(newCache(t, client), tables.Spec{L2Timeout: relaxedL2, Name: tableName(t), LoaderTimeout: 200 * time.Millisecond}, load, nil)
		require.NoError(t, err)
		const waiters = 10
		var joins atomicCounter
		tbl.SetHookJoined(func(id string) {
			if id == "slow" && joins.inc() == waiters {
				close(joined) // every waiter is on the one fill: let the loader time out
			}
		})

		errs := make([]error, waiters)
		var wg sync.WaitGroup
		for i := range waiters {
			wg.Go(func() { _, errs[i] = tbl.Get(ctx, "slow") })
		}
		u, err := tbl.Get(ctx, "fast")
		require.NoError(t, err, "other ids are unharmed")
		require.Equal(t, "fast", u.ID)
		wg.Wait()
		for i, err := range errs {
			require.ErrorIs(t, err, cache.ErrLoaderTimeout, "waiter %d", i)
			require.ErrorIs(t, err, context.DeadlineExceeded, "waiter %d", i)
			var le *cache.LoadError
			require.ErrorAs(t, err, &le)
			require.True(t, le.Timeout)
			require.Equal(t, "slow", le.ID)
		}
		require.Equal(t, 1, slowCalls.get(), "the waiters shared one load")
		require.Empty(t, readRaw(t, client, rowKey(t, tbl, "slow")), "the lease was released, nothing cached")
		require.Equal(t, int64(1), tbl.Stats().LoadErrors)

		tbl.SetHookJoined(nil)
		_, err = tbl.Get(ctx, "slow")
		require.ErrorIs(t, err, cache.ErrLoaderTimeout)
		require.Equal(t, 2, slowCalls.get(), "a failure is not cached")
	})
}

// TestLoaderPanic: a panicking loader is an error carrying the panic and its stack for every
// caller waiting on it; the process and other ids are unharmed.
func TestLoaderPanic(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, client valkey.Client) {
		ctx := context.Background()
		gate := make(chan struct{})
		load := func(ctx context.Context, id string) (user, error) {
			if id == "boom" {
				<-gate
				panic(fmt.Sprintf("loader exploded on %s", id))
			}
			return user{ID: id}, nil
		}
		tbl, err := cache.NewTable(newCache(t, client), tables.Spec{L2Timeout: relaxedL2, Name: tableName(t)}, load, nil)
		require.NoError(t, err)

		const waiters = 10
		var joins atomicCounter
		tbl.SetHookJoined(func(id string) {
			if joins.inc() == waiters {
				close(gate) // every waiter is on the one fill: let it panic
			}
		})
		errs := make([]error, waiters)
		var wg sync.WaitGroup
		for i := range waiters {
			wg.Go(func() { _, errs[i] = tbl.Get(ctx, "boom") })
		}
		wg.Wait()
		for i, err := range errs {
			var pe *cache.PanicError
			require.ErrorAs(t, err, &pe, "waiter %d", i)
			require.Equal(t, "loader exploded on boom", pe.Value)
			require.Contains(t, err.Error(), "loader exploded on boom")
			require.Contains(t, err.Error(), "get_test.go", "the error text carries the stack")
			require.NotErrorIs(t, err, cache.ErrLoaderTimeout)
		}
		tbl.SetHookJoined(nil)
		u, err := tbl.Get(ctx, "fine")
		require.NoError(t, err)
		require.Equal(t, "fine", u.ID)
		require.Empty(t, readRaw(t, client, rowKey(t, tbl, "boom")), "the lease was released")
		require.Equal(t, int64(1), tbl.Stats().LoadErrors)
	})
}

// TestCallerCancelDoesNotSpoilFill: a caller whose context ends returns at once; the fill
// it started goes on and serves the others.
func TestCallerCancelDoesNotSpoilFill(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, client valkey.Client) {
		b := newBlocking()
		tbl, err := cache.NewTable(newCache(t, client), tables.Spec{L2Timeout: relaxedL2, Name: tableName(t)}, b.load, nil)
		require.NoError(t, err)

		impatient, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { _, err := tbl.Get(impatient, "k"); done <- err }()
		recv(t, b.started, 10*time.Second)
		patient := make(chan user, 1)
		go func() {
			u, err := tbl.Get(context.Background(), "k")
			if err == nil {
				patient <- u
			}
			close(patient)
		}()
		cancel()
		require.ErrorIs(t, recv(t, done, 10*time.Second), context.Canceled)
		close(b.release)
		u, ok := <-patient
		require.True(t, ok, "the patient caller gets the value")
		require.Equal(t, "name-k", u.Name)
		require.Equal(t, 1, b.calls.get())
		require.Equal(t, "value", cache.ParsedKind(readRaw(t, client, rowKey(t, tbl, "k"))))
	})
}

// TestL1NeverOutlivesRow: a value read from an L2 row with little time left lives in L1 no
// longer than the row, even with a long L1TTL.
func TestL1NeverOutlivesRow(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, client valkey.Client) {
		ctx := context.Background()
		name := tableName(t)
		spec := tables.Spec{L2Timeout: relaxedL2, Name: name, TTL: 600 * time.Millisecond, Jitter: tables.Off, L1TTL: time.Hour, EarlyRefreshBeta: tables.Off}
		writerSrc, readerSrc := &source{}, &source{}
		writer := newTable(t, newCache(t, client), spec, writerSrc)
		reader := newTable(t, newCache(t, client), spec, readerSrc)
		key := rowKey(t, writer, "k")

		_, err := writer.Get(ctx, "k")
		require.NoError(t, err)
		valkeytest.Eventually(t, 5*time.Second, "the row to age", func() bool { return pttlOf(t, client, key) < 400 })
		_, err = reader.Get(ctx, "k")
		require.NoError(t, err)
		require.Equal(t, int64(1), reader.Stats().L2Hits)
		require.Zero(t, readerSrc.calls.Load())
		_, err = reader.Get(ctx, "k")
		require.NoError(t, err)
		require.Equal(t, int64(1), reader.Stats().L1Hits, "L1 holds it while the row lives")

		valkeytest.Eventually(t, 5*time.Second, "the row to expire", func() bool { return pttlOf(t, client, key) == -2 })
		_, err = reader.Get(ctx, "k")
		require.NoError(t, err)
		require.Equal(t, int64(1), reader.Stats().L1Hits, "no L1 hit once the row is gone")
		require.Equal(t, int64(1), readerSrc.calls.Load(), "the reader reloads")
	})
}

// TestInstallRefusedAfterForget: an id forgotten after a fill read its generation (as an
// invalidation would be) is not installed in L1 by that fill.
func TestInstallRefusedAfterForget(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, client valkey.Client) {
		for _, tc := range []struct {
			name   string
			forget func(tbl *cache.Table[string, user], id string)
		}{
			{"Forget", func(tbl *cache.Table[string, user], id string) { tbl.Forget(id) }},
			{"ForgetAll", func(tbl *cache.Table[string, user], _ string) { tbl.ForgetAll() }},
			{"dropIDs", func(tbl *cache.Table[string, user], id string) { cache.DropIDs(tbl, []string{id}) }},
		} {
			t.Run(tc.name, func(t *testing.T) {
				ctx := context.Background()
				src := &source{}
				tbl := newTable(t, newCache(t, client), tables.Spec{L2Timeout: relaxedL2}, src)
				var once sync.Once
				tbl.SetHookAfterRead(func(id string) { once.Do(func() { tc.forget(tbl, id) }) })

				_, err := tbl.Get(ctx, "k")
				require.NoError(t, err)
				require.Equal(t, int64(1), tbl.Stats().InstallsRefused)
				_, err = tbl.Get(ctx, "k")
				require.NoError(t, err)
				st := tbl.Stats()
				require.Zero(t, st.L1Hits, "the refused value never reached L1")
				require.Equal(t, int64(1), st.L2Hits, "the row was written; the next read takes it from L2")
				_, err = tbl.Get(ctx, "k")
				require.NoError(t, err)
				require.Equal(t, int64(1), tbl.Stats().L1Hits, "a later read installs normally")
			})
		}
	})
}

// TestFillRefusedWhenLeaseGone: a filler whose lease was deleted (as an invalidation deletes
// the row) or taken over does not write its value; the caller still gets it.
func TestFillRefusedWhenLeaseGone(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, client valkey.Client) {
		for _, tc := range []struct {
			name    string
			meddle  func(key string) valkey.Completed
			wantRow string
		}{
			{"deleted", func(key string) valkey.Completed { return client.B().Del().Key(key).Build() }, "absent"},
			{"taken over", func(key string) valkey.Completed {
				return client.B().Set().Key(key).Value(cache.LeaseRow("someoneelse12345")).Px(time.Minute).Build()
			}, "lease"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				ctx := context.Background()
				b := newBlocking()
				tbl, err := cache.NewTable(newCache(t, client), tables.Spec{L2Timeout: relaxedL2, Name: tableName(t)}, b.load, nil)
				require.NoError(t, err)
				key := rowKey(t, tbl, "k")
				done := make(chan error, 1)
				go func() { _, err := tbl.Get(ctx, "k"); done <- err }()
				recv(t, b.started, 10*time.Second)
				require.Equal(t, "lease", cache.ParsedKind(readRaw(t, client, key)))
				require.NoError(t, client.Do(ctx, tc.meddle(key)).Error())
				close(b.release)
				require.NoError(t, recv(t, done, 10*time.Second))
				require.Equal(t, int64(1), tbl.Stats().FillsRefused)
				raw := readRaw(t, client, key)
				if raw == "" {
					require.Equal(t, "absent", tc.wantRow)
				} else {
					require.Equal(t, tc.wantRow, cache.ParsedKind(raw))
				}
				require.Zero(t, tbl.Stats().L1Hits)
			})
		}
	})
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

// TestNewTableErrors: a bad spec, a duplicate name and a nil loader are refused; a refused
// name can be declared again.
func TestNewTableErrors(t *testing.T) {
	t.Parallel()
	c := newCache(t, targets[0].client(t))
	src := &source{}
	name := tableName(t)
	_, err := cache.NewTable(c, tables.Spec{L2Timeout: relaxedL2, Name: "bad{name"}, src.load, nil)
	require.ErrorIs(t, err, tables.ErrInvalidSpec)
	require.ErrorIs(t, err, keys.ErrInvalid)
	_, err = cache.NewTable(c, tables.Spec{L2Timeout: relaxedL2, Name: name, Jitter: 1.5}, src.load, nil)
	require.ErrorIs(t, err, tables.ErrInvalidSpec)
	_, err = cache.NewTable[string, user](c, tables.Spec{L2Timeout: relaxedL2, Name: name}, nil, nil)
	require.ErrorContains(t, err, "nil loader")

	_, err = cache.NewTable(c, tables.Spec{L2Timeout: relaxedL2, Name: name}, src.load, nil)
	require.NoError(t, err)
	_, err = cache.NewTable(c, tables.Spec{L2Timeout: relaxedL2, Name: name}, src.load, nil)
	require.ErrorIs(t, err, tables.ErrDuplicate)
	require.Len(t, c.Tables(), 1)
	require.Contains(t, c.Stats(), name)

	other := newCache(t, targets[0].client(t))
	_, err = cache.NewTable(other, tables.Spec{L2Timeout: relaxedL2, Name: name}, src.load, nil)
	require.NoError(t, err, "declarations belong to their cache object")
}

// TestNewTableL1MaxEntriesBound: an L1MaxEntries whose counter sizing would overflow is
// refused by NewTable with an error, where ristretto would panic or refuse obscurely.
func TestNewTableL1MaxEntriesBound(t *testing.T) {
	t.Parallel()
	c := newCache(t, targets[0].client(t))
	src := &source{}
	for _, n := range []int64{tables.MaxL1MaxEntries + 1, 1 << 59, math.MaxInt64} {
		_, err := cache.NewTable(c, tables.Spec{L2Timeout: relaxedL2, Name: tableName(t), L1MaxEntries: n}, src.load, nil)
		require.ErrorIs(t, err, tables.ErrInvalidSpec, "%d", n)
		require.ErrorContains(t, err, "L1MaxEntries")
		require.ErrorContains(t, err, strconv.FormatInt(tables.MaxL1MaxEntries, 10))
	}
	require.Empty(t, c.Tables())
}

// TestClosed: after Close, reads that need the network and new tables answer ErrClosed.
func TestClosed(t *testing.T) {
	t.Parallel()
	client := targets[0].client(t)
	c, err := cache.New(client, cache.Config{})
	require.NoError(t, err)
	src := &source{}
	tbl := newTable(t, c, tables.Spec{L2Timeout: relaxedL2}, src)
	c.Close()
	c.Close()
	_, err = tbl.Get(context.Background(), "k")
	require.ErrorIs(t, err, cache.ErrClosed)
	_, err = tbl.GetMany(context.Background(), []string{"a", "b"})
	require.ErrorIs(t, err, cache.ErrClosed)
	_, err = cache.NewTable(c, tables.Spec{L2Timeout: relaxedL2, Name: tableName(t) + "x"}, src.load, nil)
	require.ErrorIs(t, err, cache.ErrClosed)
	require.Zero(t, src.calls.Load())
}

// TestL2Unavailable: a caller that gave up before L2 answered gets its own error
// (context.Canceled), not an L2 failure, not a panic and not a loader call.
func TestL2Unavailable(t *testing.T) {
	t.Parallel()
	client := targets[0].client(t)
	src := &source{}
	tbl := newTable(t, newCache(t, client), tables.Spec{L2Timeout: relaxedL2}, src)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := tbl.Get(ctx, "k")
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, err, cache.ErrL2, "the caller's cancellation is not an L2 failure")
	require.False(t, errors.Is(err, cache.ErrNotFound))
	require.Zero(t, src.calls.Load())
}

// TestForgetUnderLoad: drops and flushes racing reads and fills never serve a wrong value,
// never panic, and leave the table working (run with -race).
func TestForgetUnderLoad(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := targets[0].client(t)
	src := &source{}
	tbl := newTable(t, newCache(t, client), tables.Spec{L2Timeout: relaxedL2, L1MaxEntries: 64}, src)
	var stop sync.WaitGroup
	done := make(chan struct{})
	for w := range 4 {
		stop.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				id := strconv.Itoa((i*7 + w) % 100)
				u, err := tbl.Get(ctx, id)
				if err != nil || u.Name != "name-"+id {
					t.Errorf("Get(%s) = %+v, %v", id, u, err)
					return
				}
			}
		})
	}
	var flushes atomic.Int64
	stop.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			if i%10 == 0 {
				tbl.ForgetAll()
				flushes.Add(1)
			} else {
				tbl.Forget(strconv.Itoa(i % 100))
			}
			time.Sleep(100 * time.Microsecond)
		}
	})
	// Run until every kind of event has happened many times over, however slow the machine.
	valkeytest.Eventually(t, 30*time.Second, "hits from both tiers across many flushes", func() bool {
		st := tbl.Stats()
		return st.L1Hits > 1000 && st.L2Hits > 100 && flushes.Load() > 50 || t.Failed()
	})
	close(done)
	stop.Wait()
	require.LessOrEqual(t, src.calls.Load(), int64(100), "each id is loaded at most once: its row stays in L2")
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
