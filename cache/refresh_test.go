package cache_test

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
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

// TestEarlyRefresh (XFetch): readers busy on a row as it nears expiry make one caller
// refresh it before it expires, across two cache objects (two processes' worth): every load
// after the first is an early refresh of a distinct row version (never two refreshes of one
// version, never a fill after expiry), no reader ever waits for a load or misses, and both
// caches move on to the new value.
func TestEarlyRefresh(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, client valkey.Client) {
		for _, tc := range []struct {
			name  string
			l1TTL time.Duration
		}{
			{"from L1", 0},
			{"from L2", tables.Off},
		} {
			t.Run(tc.name, func(t *testing.T) {
				ctx := context.Background()
				name := tableName(t)
				key := rowKey(t, nameOnly(name), "hot")
				var evMu sync.Mutex
				var events []string
				refreshed := map[string]int{} // row version -> refresh loads of it
				t0 := time.Now()
				ev := func(s string, args ...any) {
					evMu.Lock()
					events = append(events, fmt.Sprintf("%6d ms: ", time.Since(t0).Milliseconds())+fmt.Sprintf(s, args...))
					evMu.Unlock()
				}
				defer func() {
					if t.Failed() {
						evMu.Lock()
						defer evMu.Unlock()
						t.Log("events:\n" + strings.Join(events, "\n"))
					}
				}()
				var loads atomic.Int64
				load := func(ctx context.Context, id string) (user, error) {
					n := loads.Add(1)
					raw, err := client.Do(ctx, client.B().Get().Key(key).Build()).ToString()
					if err != nil && !valkey.IsValkeyNil(err) {
						return user{}, err
					}
					p, err := client.Do(ctx, client.B().Pttl().Key(key).Build()).AsInt64()
					if err != nil {
						return user{}, err
					}
					version, claimed := cache.ParsedVersion(raw)
					ev("load v%d begins: row %s (claimed for refresh: %v), %d ms left", n, cache.ParsedKind(raw), claimed, p)
					if claimed {
						evMu.Lock()
						refreshed[version]++
						evMu.Unlock()
					}
					time.Sleep(50 * time.Millisecond) // delta: XFetch scales its window by it
					return user{ID: id, Name: "v" + strconv.FormatInt(n, 10)}, nil
				}
				// The window opens 9.2*delta*beta before expiry: about 0.9 s here, 1.8 s if a
				// load were measured at 100 ms on a starved machine; under half the TTL, so the
				// row a refresh writes does not enter its own window before the old row has
				// expired and every reader has moved on. Beta 2 starts the refresh early enough
				// to finish before expiry even at a slow machine's read rate.
				spec := tables.Spec{L2Timeout: relaxedL2, Name: name, TTL: 4 * time.Second, Jitter: tables.Off, L1TTL: tc.l1TTL, EarlyRefreshBeta: 2}
				a, err := cache.NewTable(newCache(t, client), spec, load, nil)
				require.NoError(t, err)
				b, err := cache.NewTable(newCache(t, client), spec, load, nil)
				require.NoError(t, err)

				_, err = a.Get(ctx, "hot")
				require.NoError(t, err)

				var stop atomic.Bool
				var seen [2]atomic.Int64 // the newest version each cache read
				var readErrs atomic.Int64
				var wg sync.WaitGroup
				for i := range 8 {
					tbl, which := a, i%2
					if which == 1 {
						tbl = b
					}
					wg.Go(func() {
						for !stop.Load() {
							u, err := tbl.Get(ctx, "hot")
							if err != nil {
								readErrs.Add(1)
								return
							}
							v, _ := strconv.ParseInt(strings.TrimPrefix(u.Name, "v"), 10, 64)
							if old := seen[which].Load(); v > old && seen[which].CompareAndSwap(old, v) {
								ev("cache %d reads v%d", which, v)
							}
							// Readers pace themselves, as real callers doing other work do: a
							// process whose cores do nothing but spin on L1 hits starves the
							// refresh goroutine's network round trips.
							if tc.l1TTL == tables.Off {
								time.Sleep(250 * time.Microsecond)
							} else {
								time.Sleep(50 * time.Microsecond)
							}
						}
					})
				}
				valkeytest.Eventually(t, 15*time.Second, "both caches to read a refreshed value", func() bool {
					return seen[0].Load() >= 2 && seen[1].Load() >= 2 || readErrs.Load() > 0
				})
				stop.Store(true)
				wg.Wait()

				require.Zero(t, readErrs.Load())
				n := loads.Load()
				sa, sb := a.Stats(), b.Stats()
				require.Equal(t, n-1, sa.EarlyRefreshes+sb.EarlyRefreshes, "every load after the first was an early refresh")
				require.Equal(t, int64(1), sa.Misses+sb.Misses, "only the very first read missed: nobody waited for a load")
				require.Zero(t, sa.LoadErrors+sb.LoadErrors)
				evMu.Lock()
				perVersion := maps.Clone(refreshed)
				evMu.Unlock()
				for version, k := range perVersion {
					require.Equal(t, 1, k, "row version %s was refreshed %d times", version, k)
				}
				require.Len(t, perVersion, int(n-1), "each refresh claimed the row version it replaced")
				require.Equal(t, "value", cache.ParsedKind(readRaw(t, client, key)))
			})
		}
	})
}

// nameOnly adapts a table name to rowKey.
type nameOnly string

func (n nameOnly) Spec() tables.Spec { return tables.Spec{Name: string(n)} }
