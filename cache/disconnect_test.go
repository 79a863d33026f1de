package cache_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
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

const killInterval = 300 * time.Millisecond // the reconcile interval of the disconnect test

// runLoadHelper reads 20 keys on 4 goroutines and prints "R <id> <value> <start unix ns>"
// per read; on "STATS" it prints "STATS <flushes> <gaps>"; on "STOP" it ends.
func runLoadHelper() error {
	client, err := helperClient()
	if err != nil {
		return err
	}
	defer client.Close()
	c, err := cache.New(client, cache.Config{ReconcileInterval: killInterval})
	if err != nil {
		return err
	}
	defer c.Close()
	tbl, err := cache.NewTable(c, tables.Spec{L2Timeout: relaxedL2, Name: os.Getenv(envTable), DegradedLoads: tables.Off}, func(context.Context, string) (int, error) { return 0, nil }, nil)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	w := bufio.NewWriter(os.Stdout)
	println := func(s string) {
		mu.Lock()
		fmt.Fprintln(w, s)
		w.Flush()
		mu.Unlock()
	}
	println("READY")
	var stop atomic.Bool
	var wg sync.WaitGroup
	for r := range 4 {
		wg.Go(func() {
			for i := r; !stop.Load(); i++ {
				id := strconv.Itoa(i % 20)
				start := time.Now().UnixNano()
				v, err := tbl.Get(context.Background(), id)
				if err == nil {
					println(fmt.Sprintf("R %s %d %d", id, v, start))
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		switch sc.Text() {
		case "STATS":
			st := tbl.Stats()
			println(fmt.Sprintf("STATS %d %d", st.Flushes, st.Gaps))
		case "STOP":
			stop.Store(true)
			wg.Wait()
			return nil
		}
	}
	return nil
}

// TestSubscriberDisconnects: CLIENT KILL TYPE pubsub every 200 ms during a mixed load across
// 2 processes (this one writes and reads, a child reads): no read is staler than one
// reconcile interval by the version history, and kills while nothing is written cause no
// flush. It runs on a dedicated server and on a dedicated cluster (every node's pub/sub
// clients are killed), so the kills reach no other test's subscribers.
func TestSubscriberDisconnects(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	t.Parallel()
	t.Run("standalone", func(t *testing.T) {
		t.Parallel()
		srv := valkeytest.Start(t)
		testSubscriberDisconnects(t, []string{srv.Addr}, srv.Client(t), []valkey.Client{srv.Client(t)})
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		cl := valkeytest.StartCluster(t)
		var admins []valkey.Client
		for _, n := range cl.Nodes {
			admins = append(admins, n.Client(t))
		}
		testSubscriberDisconnects(t, cl.Addrs(), cl.Client(t), admins)
	})
}

func testSubscriberDisconnects(t *testing.T, addrs []string, client valkey.Client, admins []valkey.Client) {
	ctx := context.Background()
	table := tableName(t)
	ch := startChild(t, []string{envHelper + "=load", envAddrs + "=" + strings.Join(addrs, ","), envTable + "=" + table})
	ch.expect(t, "READY", 60*time.Second)
	c, err := cache.New(client, cache.Config{ReconcileInterval: killInterval})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	tbl, err := cache.NewTable(c, tables.Spec{L2Timeout: relaxedL2, Name: table, DegradedLoads: tables.Off}, func(context.Context, string) (int, error) { return 0, nil }, nil)
	require.NoError(t, err)

	h := newHistory()
	var stale, reads atomic.Int64
	var worst atomic.Int64
	check := func(id string, v int, start time.Time) {
		reads.Add(1)
		if s := h.staleness(id, v, start); s > 0 {
			for m := worst.Load(); int64(s) > m && !worst.CompareAndSwap(m, int64(s)); m = worst.Load() {
			}
			if s > killInterval+slack {
				stale.Add(1)
			}
		}
	}
	stats := make(chan [2]int64, 1)
	go func() {
		for line := range ch.lines {
			f := strings.Fields(line)
			switch {
			case len(f) == 4 && f[0] == "R":
				v, _ := strconv.Atoi(f[2])
				ns, _ := strconv.ParseInt(f[3], 10, 64)
				check(f[1], v, time.Unix(0, ns))
			case len(f) == 3 && f[0] == "STATS":
				a, _ := strconv.ParseInt(f[1], 10, 64)
				b, _ := strconv.ParseInt(f[2], 10, 64)
				stats <- [2]int64{a, b}
			}
		}
	}()
	childStats := func() [2]int64 {
		_, err := io.WriteString(ch.stdin, "STATS\n")
		require.NoError(t, err)
		return recv(t, stats, 30*time.Second)
	}
	var kills atomic.Int64
	killing := make(chan struct{})
	var kwg sync.WaitGroup
	kwg.Go(func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-killing:
				return
			case <-tick.C:
				killed := false
				for _, admin := range admins {
					if admin.Do(ctx, admin.B().ClientKill().TypePubsub().Build()).Error() == nil {
						killed = true
					}
				}
				if killed {
					kills.Add(1)
				}
			}
		}
	})

	// Phase 1: kills, no writes: nothing is missed, so nothing is flushed.
	for i := range 20 {
		_, err := tbl.Get(ctx, strconv.Itoa(i))
		require.NoError(t, err)
	}
	valkeytest.Eventually(t, 30*time.Second, "five kills", func() bool { return kills.Load() >= 5 })
	require.Zero(t, tbl.Stats().Flushes, "no write, no flush")
	require.Zero(t, childStats()[0], "no write, no flush in the child")

	// Phase 2: writes and reads in both processes, kills going on.
	deadline := time.Now().Add(3 * time.Second)
	var wg sync.WaitGroup
	var stopRead atomic.Bool
	wg.Go(func() {
		for i := 0; !stopRead.Load(); i++ {
			id := strconv.Itoa(i % 20)
			start := time.Now()
			if v, err := tbl.Get(ctx, id); err == nil {
				check(id, v, start)
			}
			time.Sleep(time.Millisecond)
		}
	})
	writes := 0
	for i := 0; time.Now().Before(deadline); i++ {
		id := strconv.Itoa(i % 20)
		v := i/20 + 1
		if err := tbl.Set(ctx, id, v); err != nil {
			continue // a write may fail while its connection is killed; its version never lands
		}
		h.wrote(id, v, time.Now())
		writes++
		time.Sleep(time.Millisecond)
	}
	stopRead.Store(true)
	wg.Wait()
	close(killing)
	kwg.Wait()
	cs := childStats()
	_, err = io.WriteString(ch.stdin, "STOP\n")
	require.NoError(t, err)
	t.Logf("%d kills, %d writes, %d reads checked, worst staleness %v (bound %v + %v slack); flushes: here %d, child %d (gaps %d)",
		kills.Load(), writes, reads.Load(), time.Duration(worst.Load()), killInterval, slack, tbl.Stats().Flushes, cs[0], cs[1])
	require.Positive(t, reads.Load())
	require.Zero(t, stale.Load(), "reads staler than one reconcile interval")
	require.LessOrEqual(t, cs[0], kills.Load(), "at most one flush per kill: only missed messages flush")
}
