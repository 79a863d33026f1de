package dash_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/dash"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
)

// counting is a client that counts the round trips sent through it: each Do and each DoMulti
// is one (valkey-go writes a DoMulti's commands in one batch and reads their replies).
type counting struct {
	valkey.Client
	do, multi atomic.Int64
}

func (c *counting) Do(ctx context.Context, cmd valkey.Completed) valkey.ValkeyResult {
	c.do.Add(1)
	return c.Client.Do(ctx, cmd)
}

func (c *counting) DoMulti(ctx context.Context, cmds ...valkey.Completed) []valkey.ValkeyResult {
	c.multi.Add(1)
	return c.Client.DoMulti(ctx, cmds...)
}

var cmdstatRe = regexp.MustCompile(`(?m)^cmdstat_([a-z|]+):calls=(\d+)`)

// commandstats is INFO commandstats: calls per command, less the INFO and CONFIG the test
// sends itself.
func commandstats(t *testing.T, c valkey.Client) map[string]int {
	t.Helper()
	info, err := c.Do(context.Background(), c.B().Info().Section("commandstats").Build()).ToString()
	require.NoError(t, err)
	out := map[string]int{}
	for _, m := range cmdstatRe.FindAllStringSubmatch(info, -1) {
		// The test's own INFO and CONFIG RESETSTAT are not the page's; neither is the
		// handshake of a connection the client opens meanwhile (HELLO, CLIENT SETINFO): a CI
		// run counted one inside the measured refresh; nor valkey-go's background PING of an
		// idle connection, which a slow run (-race on a loaded machine) counted once inside
		// the overview's. The page sends no PING.
		if m[1] == "info" || strings.HasPrefix(m[1], "config") || m[1] == "hello" || strings.HasPrefix(m[1], "client") || m[1] == "ping" {
			continue
		}
		out[m[1]], _ = strconv.Atoi(m[2])
	}
	return out
}

func resetStats(t *testing.T, c valkey.Client) {
	t.Helper()
	require.NoError(t, c.Do(context.Background(), c.B().ConfigResetstat().Build()).Error())
}

// TestOverviewCost: with 200 queues and 50 tables, a live refresh is ONE pipelined round trip
// of 250 EVALSHA and nothing else (INFO commandstats on a server of its own); the overview
// page adds the two registry reads; a sampler pass is one registry read and one pipelined
// round trip of 200 EVALSHA.
func TestOverviewCost(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Start(t)
	raw := srv.Client(t)
	client := &counting{Client: raw}
	ctx := context.Background()
	const nq, nt = 200, 50
	var queues, tables []string
	var seed valkey.Commands
	for i := range nq {
		q := fmt.Sprintf("cost.q%03d", i)
		queues = append(queues, q)
		seed = append(seed, raw.B().Zadd().Key(keys.QueueRegistry()).ScoreMember().ScoreMember(1, q).Build(),
			raw.B().Zadd().Key(keys.MustQueue(q).Pending()).ScoreMember().ScoreMember(0, keys.NewJobID().String()).Build())
	}
	for i := range nt {
		tb := fmt.Sprintf("cost.t%02d", i)
		tables = append(tables, tb)
		seed = append(seed, raw.B().Zadd().Key(keys.TableRegistry()).ScoreMember().ScoreMember(1, tb).Build(),
			raw.B().Eval().Script(lua.Get("cache_stats_report").Source).Numkeys(1).Key(keys.MustTable(tb).Stats()).
				Arg("c1", fmt.Sprintf(`{"v":1,"l1_hits":%d,"misses":1}`, i), "600000", "0").Build())
	}
	for _, r := range raw.DoMulti(ctx, seed...) {
		require.NoError(t, r.Error())
	}
	s := setup(t, client, dash.Config{SampleEvery: time.Hour})
	valkeytest.Eventually(t, 10*time.Second, "the sampler's first pass", func() bool { return dash.Passes(s.dash) >= 1 })
	s.get("/") // loads the scripts (EVALSHA answers NOSCRIPT once per script after a start)

	v := url.Values{"q": queues, "t": tables}
	resetStats(t, raw)
	do0, multi0 := client.do.Load(), client.multi.Load()
	code, body := s.get("/live?" + v.Encode())
	require.Equal(t, 200, code, body)
	// Inside the scripts: counts reads 10 TYPE (the four sets, meta and the five lane keys),
	// 7 ZCARD, 1 HMGET, 1 HGET and 1 HLEN per queue; cache_stats_read 1 TYPE, TIME, HLEN and
	// HGETALL per table. The client sent nothing but the EVALSHAs.
	snapshot := map[string]int{"evalsha": nq + nt, "type": 10*nq + nt, "zcard": 7 * nq, "hmget": nq, "hget": nq,
		"time": nt, "hlen": nq + nt, "hgetall": nt}
	require.Equal(t, snapshot, commandstats(t, raw), "one EVALSHA per queue and per table, nothing else")
	require.Equal(t, int64(1), client.multi.Load()-multi0, "one pipelined round trip")
	require.Equal(t, int64(0), client.do.Load()-do0)
	var live struct {
		Queues []struct {
			Name   string
			Counts struct{ Pending int }
		}
		Tables []struct {
			Name  string
			Reads int64
		}
	}
	require.NoError(t, json.Unmarshal([]byte(body), &live))
	require.Len(t, live.Queues, nq)
	require.Len(t, live.Tables, nt)
	for i, q := range live.Queues {
		require.Equal(t, queues[i], q.Name)
		require.Equal(t, 1, q.Counts.Pending, q.Name)
	}
	require.Equal(t, int64(nt-1+1), live.Tables[nt-1].Reads)

	resetStats(t, raw)
	do0, multi0 = client.do.Load(), client.multi.Load()
	code, body = s.get("/")
	require.Equal(t, 200, code)
	require.Equal(t, nq, strings.Count(body, "data-queue="))
	require.Equal(t, nt, strings.Count(body, "data-table="))
	snapshot["zrange"] = 2
	require.Equal(t, snapshot, commandstats(t, raw))
	require.Equal(t, int64(1), client.multi.Load()-multi0)
	require.Equal(t, int64(2), client.do.Load()-do0, "the two registries")

	resetStats(t, raw)
	do0, multi0 = client.do.Load(), client.multi.Load()
	dash.Sample(ctx, s.dash)
	// workers_read: TYPE, TIME, HLEN, HGETALL per queue.
	require.Equal(t, map[string]int{"evalsha": nq, "type": nq, "time": nq, "hlen": nq, "hgetall": nq, "zrange": 1}, commandstats(t, raw))
	require.Equal(t, int64(1), client.multi.Load()-multi0)
	require.Equal(t, int64(1), client.do.Load()-do0)
	t.Logf("live refresh of %d queues and %d tables: 1 round trip, %d EVALSHA", nq, nt, nq+nt)
}
