package cache_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"regexp"
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
	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/tables"
)

func TestMain(m *testing.M) { valkeytest.Main(m) }

// runID keeps table names unique across runs in one process (-count) and across processes
// sharing a server (VALKEY_ADDR).
var runID = func() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}()

// relaxedL2 is the L2Timeout of tests that are not about a slow or absent Valkey: the suite
// runs many servers and clusters in parallel on a small machine under the race detector, where
// a healthy server can answer later than the 250 ms default. The fault tests keep short ones.
const relaxedL2 = 10 * time.Second

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

var nameSeq atomic.Int64

// tableName derives a table name from the test's name: [A-Za-z0-9_.-], at most 64 bytes,
// unique per call (a test run twice with -count must not find its first run's rows).
func tableName(t testing.TB) string {
	n := unsafeName.ReplaceAllString(t.Name(), "_")
	suffix := "." + runID + "." + strconv.FormatInt(nameSeq.Add(1), 36)
	if len(n) > 60-len(suffix) {
		n = n[len(n)-(60-len(suffix)):]
	}
	return n + suffix
}

// recv receives from ch, failing the test after d.
func recv[T any](t testing.TB, ch <-chan T, d time.Duration) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("nothing received within %v", d)
		panic("unreachable")
	}
}

// target is a server kind the fill tests run against.
type target struct {
	name   string
	client func(t *testing.T) valkey.Client
}

var targets = []target{
	{"standalone", func(t *testing.T) valkey.Client { return valkeytest.Shared(t).Client(t) }},
	{"cluster", func(t *testing.T) valkey.Client { return valkeytest.SharedCluster(t).Client(t) }},
}

// shardTarget is a target and the shards its table spreads over.
type shardTarget struct {
	target
	shards int
}

// shardTargets are the targets, and the cluster again with a table of 8 shards: the tests
// that run on it hold for a table spread over the cluster's primaries.
func shardTargets() []shardTarget {
	out := make([]shardTarget, 0, len(targets)+1)
	for _, tg := range targets {
		out = append(out, shardTarget{tg, 1})
	}
	return append(out, shardTarget{target{"cluster-8-shards", targets[1].client}, 8})
}

// eachTarget runs f as a parallel subtest per target.
func eachTarget(t *testing.T, f func(t *testing.T, client valkey.Client)) {
	t.Helper()
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			f(t, tg.client(t))
		})
	}
}

func newCache(t testing.TB, client valkey.Client) *cache.Cache {
	t.Helper()
	c, err := cache.New(client, cache.Config{})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

type user struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// source is a loader over a fake source of truth that counts its calls.
type source struct {
	calls atomic.Int64
	delay time.Duration
	mu    sync.Mutex
	gone  map[string]bool // ids the source does not have
}

func (s *source) load(ctx context.Context, id string) (user, error) {
	s.calls.Add(1)
	if s.delay > 0 {
		select {
		case <-time.After(s.delay):
		case <-ctx.Done():
			return user{}, ctx.Err()
		}
	}
	s.mu.Lock()
	gone := s.gone[id]
	s.mu.Unlock()
	if gone {
		return user{}, cache.ErrNotFound
	}
	return user{ID: id, Name: "name-" + id}, nil
}

// newTable makes a table named after the test over src.
func newTable(t testing.TB, c *cache.Cache, spec tables.Spec, src *source) *cache.Table[string, user] {
	t.Helper()
	if spec.Name == "" {
		spec.Name = tableName(t)
	}
	tbl, err := cache.NewTable(c, spec, src.load, nil)
	require.NoError(t, err)
	return tbl
}

// rowKey is the L2 row of id in tbl, in its shard when the table has more than one.
func rowKey(t testing.TB, tbl interface{ Spec() tables.Spec }, id string) string {
	t.Helper()
	spec := tbl.Spec()
	kt := keys.MustTable(spec.Name)
	if spec.Shards > 1 {
		var err error
		kt, err = kt.Shard(keys.ShardOf(id, spec.Shards))
		require.NoError(t, err)
	}
	k, err := kt.Row(id)
	require.NoError(t, err)
	return k
}

// readRaw reads a row's bytes; "" when absent.
func readRaw(t testing.TB, client valkey.Client, key string) string {
	t.Helper()
	s, err := client.Do(context.Background(), client.B().Get().Key(key).Build()).ToString()
	if valkey.IsValkeyNil(err) {
		return ""
	}
	require.NoError(t, err)
	return s
}

func pttlOf(t testing.TB, client valkey.Client, key string) int64 {
	t.Helper()
	n, err := client.Do(context.Background(), client.B().Pttl().Key(key).Build()).AsInt64()
	require.NoError(t, err)
	return n
}

// countingClient records every command the cache sends, grouped by round trip.
type countingClient struct {
	valkey.Client
	mu    sync.Mutex
	trips [][]string // per Do/DoMulti: the command names, upper case
}

func (c *countingClient) record(cmds ...valkey.Completed) {
	names := make([]string, len(cmds))
	for i := range cmds {
		names[i] = strings.ToUpper(cmds[i].Commands()[0])
	}
	c.mu.Lock()
	c.trips = append(c.trips, names)
	c.mu.Unlock()
}

func (c *countingClient) Do(ctx context.Context, cmd valkey.Completed) valkey.ValkeyResult {
	c.record(cmd)
	return c.Client.Do(ctx, cmd)
}

func (c *countingClient) DoMulti(ctx context.Context, cmds ...valkey.Completed) []valkey.ValkeyResult {
	c.record(cmds...)
	return c.Client.DoMulti(ctx, cmds...)
}

// reset forgets what was recorded.
func (c *countingClient) reset() {
	c.mu.Lock()
	c.trips = nil
	c.mu.Unlock()
}

// firstTrip is the index of the first round trip that carried cmd, -1 if none did.
func (c *countingClient) firstTrip(cmd string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, trip := range c.trips {
		for _, name := range trip {
			if name == cmd {
				return i
			}
		}
	}
	return -1
}

// tripsWith counts round trips that carried cmd, and how many cmd they carried in all.
func (c *countingClient) tripsWith(cmd string) (trips, total int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, trip := range c.trips {
		n := 0
		for _, name := range trip {
			if name == cmd {
				n++
			}
		}
		if n > 0 {
			trips++
			total += n
		}
	}
	return trips, total
}
