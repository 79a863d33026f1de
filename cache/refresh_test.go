package cache_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/tables"
)

// TestEarlyRefresh (XFetch): readers busy on a row as it nears expiry make exactly one
// caller refresh it before it expires, across two cache objects (two processes' worth);
// no reader ever waits for a load or misses, and everyone moves on to the new value (the
// other cache once its copy of the old row expires).
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
				var version atomic.Int64
				var leftAtRefresh atomic.Int64
				key := rowKey(t, nameOnly(name), "hot")
				var evMu sync.Mutex
				var events []string
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
				load := func(ctx context.Context, id string) (user, error) {
					n := version.Add(1)
					p, err := client.Do(ctx, client.B().Pttl().Key(key).Build()).AsInt64()
					if err != nil {
						return user{}, err
					}
					ev("load v%d begins, the row has %d ms left", n, p)
					defer ev("load v%d ends", n)
					if n == 2 {
						leftAtRefresh.Store(p) // an early refresh: the row it replaces must still be alive
					}
					time.Sleep(20 * time.Millisecond) // delta: XFetch scales its window by it
					return user{ID: id, Name: "v" + strconv.FormatInt(n, 10)}, nil
				}
				// The window opens 9.2*delta*beta before expiry: about 0.2 s here, 1.4 s if a
				// load were measured at 150 ms on a starved machine; under half the TTL either
				// way, so the row a refresh writes cannot enter its own window before the old
				// row has expired and every reader has moved on.
				spec := tables.Spec{Name: name, TTL: 3 * time.Second, Jitter: tables.Off, L1TTL: tc.l1TTL, EarlyRefreshBeta: 1}
				a, err := cache.NewTable(newCache(t, client), spec, load, nil)
				require.NoError(t, err)
				b, err := cache.NewTable(newCache(t, client), spec, load, nil)
				require.NoError(t, err)

				_, err = a.Get(ctx, "hot")
				require.NoError(t, err)
				firstExpiry := time.Now().Add(time.Duration(pttlOf(t, client, key)) * time.Millisecond)

				var stop atomic.Bool
				var seenNew [2]atomic.Bool
				var readErrs atomic.Int64
				var wg sync.WaitGroup
				for i := range 8 {
					tbl, which := a, 0
					if i%2 == 1 {
						tbl, which = b, 1
					}
					wg.Go(func() {
						for !stop.Load() {
							u, err := tbl.Get(ctx, "hot")
							if err != nil {
								readErrs.Add(1)
								return
							}
							if u.Name == "v2" && !seenNew[which].Load() {
								seenNew[which].Store(true)
								ev("cache %d sees v2", which)
							}
							// Readers pace themselves, as real callers doing other work do: a
							// process whose cores do nothing but spin on L1 hits starves the
							// refresh goroutine's network round trips.
							if tc.l1TTL == tables.Off {
								time.Sleep(time.Millisecond)
							} else {
								time.Sleep(50 * time.Microsecond)
							}
						}
					})
				}
				waitFor(t, "both caches to read the refreshed value", 10*time.Second, func() bool {
					return seenNew[0].Load() && seenNew[1].Load() || readErrs.Load() > 0
				})
				stop.Store(true)
				wg.Wait()

				require.Zero(t, readErrs.Load())
				require.Equal(t, int64(2), version.Load(), "one initial load and one refresh, across both caches")
				require.Greater(t, leftAtRefresh.Load(), int64(0), "the refresh ran before the row expired")
				sa, sb := a.Stats(), b.Stats()
				require.Equal(t, int64(1), sa.EarlyRefreshes+sb.EarlyRefreshes, "one caller refreshed")
				require.Equal(t, int64(1), sa.Misses+sb.Misses, "only the very first read missed: nobody waited for the refresh")
				require.Zero(t, sa.LoadErrors+sb.LoadErrors)
				require.True(t, time.Now().Before(firstExpiry.Add(time.Second)), "everyone moved on when the old row expired")
				raw := readRaw(t, client, key)
				require.Equal(t, "value", cache.ParsedKind(raw))
				require.JSONEq(t, `{"id":"hot","name":"v2"}`, cache.ParsedPayload(raw))
			})
		}
	})
}

// nameOnly adapts a table name to rowKey.
type nameOnly string

func (n nameOnly) Name() string { return string(n) }
