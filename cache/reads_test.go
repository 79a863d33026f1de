package cache_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/tables"
)

// TestColdGetReadsRowOnce: a cold Get reads the row once, GET and PTTL in one round trip,
// before it takes the fill lease: the fill acts on the read the miss already made.
func TestColdGetReadsRowOnce(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, raw valkey.Client) {
		ctx := context.Background()
		client := &countingClient{Client: raw}
		src := &source{}
		// No stats and no periodic reconcile: their round trips would count among the trips
		// measured below; nor the table's listing and first record read, which run in the
		// background after the declaration: they are waited for first.
		c, err := cache.New(client, cache.Config{StatsInterval: -1, ReconcileInterval: time.Hour})
		require.NoError(t, err)
		t.Cleanup(c.Close)
		tbl := newTable(t, c, tables.Spec{L2Timeout: relaxedL2}, src)
		_, err = tbl.Get(ctx, "warm") // the server has cache_fill loaded (no NOSCRIPT fallback below)
		require.NoError(t, err)
		valkeytest.Eventually(t, 10*time.Second, "the table listed and its record read", func() bool {
			infos, err := cache.Tables(ctx, raw)
			require.NoError(t, err)
			return tbl.Synced() && slices.ContainsFunc(infos, func(i cache.TableInfo) bool { return i.Name == tbl.Name() })
		})
		client.reset()

		u, err := tbl.Get(ctx, "k")
		require.NoError(t, err)
		require.Equal(t, "name-k", u.Name)
		require.Equal(t, int64(2), src.calls.Load())

		trips, n := client.tripsWith("GET")
		require.Equal(t, [2]int{0, 0}, [2]int{trips, n}, "no GET: the read is the lease's SET NX GET")
		trips, n = client.tripsWith("SET")
		require.Equal(t, [2]int{1, 1}, [2]int{trips, n}, "one SET NX GET")
		trips, n = client.tripsWith("PTTL")
		require.Equal(t, [2]int{1, 1}, [2]int{trips, n}, "one PTTL")
		read := client.firstTrip("SET")
		require.Equal(t, read, client.firstTrip("PTTL"), "SET NX GET and PTTL share one round trip")
		require.Equal(t, read+1, client.firstTrip("EVALSHA"), "then the fill's write: two round trips in all")
		require.Len(t, client.trips, 2)
	})
}

// TestLeaseReplyIsARead: the miss's read is SET NX GET with PTTL pipelined; where another
// filler's row is, its reply is acted on like a GET's: a value or a not-found ends the read
// (with the PTTL of the same round trip, so L1 does not outlive the row), a lease is waited
// on, bytes this version cannot read are reclaimed. No GET is sent to learn what the reply
// already said.
func TestLeaseReplyIsARead(t *testing.T) {
	t.Parallel()
	payload := []byte(`{"id":"k","name":"from the other filler"}`)
	for _, tc := range []struct {
		name  string
		plant func(client valkey.Client, key string) valkey.Completed
		check func(t *testing.T, client *countingClient, tbl *cache.Table[string, user], src *source, key string)
	}{
		{"value", func(client valkey.Client, key string) valkey.Completed {
			row := cache.ValueRow("otherfiller12345", time.Millisecond, time.Now().Add(time.Second).UnixMilli(), payload)
			return client.B().Set().Key(key).Value(row).Px(time.Second).Build()
		}, func(t *testing.T, client *countingClient, tbl *cache.Table[string, user], src *source, key string) {
			u, err := tbl.Get(context.Background(), "k")
			require.NoError(t, err)
			require.Equal(t, "from the other filler", u.Name)
			require.Zero(t, src.calls.Load(), "the other filler's value ended the fill")
			require.Equal(t, int64(1), tbl.Stats().L2Hits)
			trips, _ := client.tripsWith("GET")
			require.Zero(t, trips, "no GET")
			trips, _ = client.tripsWith("PTTL")
			require.Equal(t, 1, trips, "the PTTL of the replied row, in the read's round trip")

			_, err = tbl.Get(context.Background(), "k")
			require.NoError(t, err)
			require.Equal(t, int64(1), tbl.Stats().L1Hits, "the replied value went to L1")
			valkeytest.Eventually(t, 5*time.Second, "the row to expire", func() bool { return pttlOf(t, client, key) == -2 })
			u, err = tbl.Get(context.Background(), "k")
			require.NoError(t, err)
			require.Equal(t, "name-k", u.Name, "L1 did not outlive the row")
			require.Equal(t, int64(1), src.calls.Load())
		}},
		{"not found", func(client valkey.Client, key string) valkey.Completed {
			return client.B().Set().Key(key).Value(cache.NotFoundRow(time.Millisecond)).Px(time.Minute).Build()
		}, func(t *testing.T, client *countingClient, tbl *cache.Table[string, user], src *source, key string) {
			_, err := tbl.Get(context.Background(), "k")
			require.ErrorIs(t, err, cache.ErrNotFound)
			require.Zero(t, src.calls.Load())
			trips, _ := client.tripsWith("GET")
			require.Zero(t, trips, "no GET")
			_, err = tbl.Get(context.Background(), "k")
			require.ErrorIs(t, err, cache.ErrNotFound)
			require.Equal(t, int64(1), tbl.Stats().L1Hits, "the replied not-found went to L1")
		}},
		{"unreadable", func(client valkey.Client, key string) valkey.Completed {
			return client.B().Set().Key(key).Value("\x00 not a row").Px(time.Minute).Build()
		}, func(t *testing.T, client *countingClient, tbl *cache.Table[string, user], src *source, key string) {
			u, err := tbl.Get(context.Background(), "k")
			require.NoError(t, err)
			require.Equal(t, "name-k", u.Name)
			require.Equal(t, int64(1), src.calls.Load())
			require.Equal(t, int64(1), tbl.Stats().CorruptRows, "reclaimed from the lease reply")
			trips, _ := client.tripsWith("GET")
			require.Zero(t, trips, "no GET")
			require.Equal(t, "value", cache.ParsedKind(readRaw(t, client, key)))
		}},
		{"lease", func(client valkey.Client, key string) valkey.Completed {
			// Long enough to be there when the Get reads it on a loaded machine (with 50 ms the
			// lease had once expired first), short enough to be waited out.
			return client.B().Set().Key(key).Value(cache.LeaseRow("deadfiller123456")).Px(400 * time.Millisecond).Build()
		}, func(t *testing.T, client *countingClient, tbl *cache.Table[string, user], src *source, key string) {
			u, err := tbl.Get(context.Background(), "k")
			require.NoError(t, err)
			require.Equal(t, "name-k", u.Name)
			require.Equal(t, int64(1), src.calls.Load())
			st := tbl.Stats()
			require.Equal(t, int64(1), st.LeaseWaits, "the replied lease was waited on")
			require.Equal(t, int64(1), st.LeaseTakeovers, "and taken over once it expired")
			require.Equal(t, "value", cache.ParsedKind(readRaw(t, client, key)))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			eachTarget(t, func(t *testing.T, raw valkey.Client) {
				client := &countingClient{Client: raw}
				src := &source{}
				tbl := newTable(t, newCache(t, client), tables.Spec{L2Timeout: relaxedL2, Jitter: tables.Off, L1TTL: time.Hour}, src)
				key := rowKey(t, tbl, "k")
				// another filler wrote the row before this one's read
				require.NoError(t, raw.Do(context.Background(), tc.plant(raw, key)).Error())
				client.reset()
				tc.check(t, client, tbl, src, key)
			})
		})
	}
}
