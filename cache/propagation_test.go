package cache_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/tables"
)

// rawChannel is the propagation test's raw shard channel, in the table's slot.
func rawChannel(table string) string { return "cachetest:{" + table + "}:raw" }

func helperClient() (valkey.Client, error) {
	return valkey.NewClient(valkey.ClientOption{InitAddress: strings.Split(os.Getenv(envAddrs), ","), DisableCache: true})
}

// runPropagateHelper: a cache whose subscriber prints "DROP <id> <unix ns> <value of the
// next Get>" when it applied an invalidation, and a raw SSUBSCRIBE that prints
// "RAW <message> <unix ns>".
func runPropagateHelper() error {
	table := os.Getenv(envTable)
	client, err := helperClient()
	if err != nil {
		return err
	}
	defer client.Close()
	c, err := cache.New(client, cache.Config{})
	if err != nil {
		return err
	}
	defer c.Close()
	var tbl *cache.Table[string, int]
	out := make(chan string, 64)
	c.SetHookDropped(func(_ string, ids []string) {
		at := time.Now().UnixNano()
		for _, id := range ids {
			v, err := tbl.Get(context.Background(), id)
			if err != nil {
				v = -1
			}
			out <- fmt.Sprintf("DROP %s %d %d", id, at, v)
		}
	})
	shards, _ := strconv.Atoi(os.Getenv(envShards))
	tbl, err = cache.NewTable(c, tables.Spec{L2Timeout: relaxedL2, Name: table, DegradedLoads: tables.Off, Shards: shards}, func(context.Context, string) (int, error) { return -2, nil }, nil)
	if err != nil {
		return err
	}
	sub, release := client.Dedicate()
	defer release()
	ready := make(chan struct{})
	go func() {
		_ = sub.Receive(valkey.WithOnSubscriptionHook(context.Background(), func(s valkey.PubSubSubscription) {
			if s.Kind == "ssubscribe" {
				close(ready)
			}
		}), sub.B().Ssubscribe().Channel(rawChannel(table)).Build(), func(m valkey.PubSubMessage) {
			out <- fmt.Sprintf("RAW %s %d", m.Message, time.Now().UnixNano())
		})
	}()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		return fmt.Errorf("raw subscribe timed out")
	}
	fmt.Println("READY")
	for line := range out {
		fmt.Println(line)
	}
	return nil
}

// TestPropagation: 2 processes; after Set returns in one, the other drops the id and its
// next Get returns the new value. Over 1,000 writes it reports p50 and p99 from the write to
// the remote L1 drop, beside raw SPUBLISH -> receive round trips interleaved in the same run.
func TestPropagation(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	t.Parallel()
	cluster := func(t *testing.T) []string { return valkeytest.SharedCluster(t).Addrs() }
	clusterClient := func(t *testing.T) valkey.Client { return valkeytest.SharedCluster(t).Client(t) }
	for _, tg := range []struct {
		name   string
		shards int
		addrs  func(t *testing.T) []string
		cl     func(t *testing.T) valkey.Client
	}{
		{"standalone", 1, func(t *testing.T) []string { return []string{valkeytest.Shared(t).Addr} }, func(t *testing.T) valkey.Client { return valkeytest.Shared(t).Client(t) }},
		{"cluster", 1, cluster, clusterClient},
		{"cluster-8-shards", 8, cluster, clusterClient},
	} {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			table := tableName(t)
			client := tg.cl(t)
			ch := startChild(t, []string{envHelper + "=propagate", envAddrs + "=" + strings.Join(tg.addrs(t), ","), envTable + "=" + table,
				envShards + "=" + strconv.Itoa(tg.shards)})
			ch.expect(t, "READY", 60*time.Second)
			c := newCache(t, client)
			tbl, err := cache.NewTable(c, tables.Spec{L2Timeout: relaxedL2, Name: table, DegradedLoads: tables.Off, Shards: tg.shards}, func(context.Context, string) (int, error) { return -2, nil }, nil)
			require.NoError(t, err)
			const writes = 1000
			var ours, raw []time.Duration
			for i := range writes {
				id := "p" + strconv.Itoa(i%16) // 16 ids: over a sharded table's shards
				start := time.Now()
				require.NoError(t, tbl.Set(ctx, id, i))
				line := ch.expect(t, "DROP "+id+" ", 30*time.Second)
				f := strings.Fields(line)
				at, _ := strconv.ParseInt(f[2], 10, 64)
				v, _ := strconv.Atoi(f[3])
				require.Equal(t, i, v, "the other process's next Get returns the new value")
				ours = append(ours, time.Unix(0, at).Sub(start))

				msg := "r" + strconv.Itoa(i)
				start = time.Now()
				require.NoError(t, client.Do(ctx, client.B().Spublish().Channel(rawChannel(table)).Message(msg).Build()).Error())
				line = ch.expect(t, "RAW "+msg+" ", 30*time.Second)
				at, _ = strconv.ParseInt(strings.Fields(line)[2], 10, 64)
				raw = append(raw, time.Unix(0, at).Sub(start))
			}
			pct := func(d []time.Duration, p float64) time.Duration {
				s := slices.Clone(d)
				slices.Sort(s)
				return s[int(p*float64(len(s)-1))]
			}
			p50, p99, r50, r99 := pct(ours, .5), pct(ours, .99), pct(raw, .5), pct(raw, .99)
			t.Logf("propagation over %d writes: p50 %v p99 %v; raw SPUBLISH->receive p50 %v p99 %v; ratio p50 %.2fx p99 %.2fx",
				writes, p50, p99, r50, r99, float64(p50)/float64(r50), float64(p99)/float64(r99))
			// The aim is p99 within 2x of raw; on a shared, loaded machine the bound asserted
			// is looser so the test does not flake, and the measured ratio is logged.
			require.Less(t, float64(p99), 5*float64(r99)+float64(5*time.Millisecond))
		})
	}
}
