package cache_test

import (
	"context"
	"strconv"
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
