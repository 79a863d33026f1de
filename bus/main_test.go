package bus_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

func TestMain(m *testing.M) { valkeytest.Main(m) }

// setup is the start of a protocol test on one target: a context, the target's client, a
// Bus over it with cfg, and a queue name (with its keys) that no other test uses.
func setup(t *testing.T, tg valkeytest.Target, cfg bus.Config) (context.Context, valkey.Client, *bus.Bus, string, keys.Queue) {
	t.Helper()
	name := valkeytest.TestName(t)
	return context.Background(), tg.Client, newBus(t, tg.Client, cfg), name, keys.MustQueue(name)
}

// newPlainClient is a standalone client that the caller closes (valkeytest's clients close
// on cleanup, too late for a leak check).
func newPlainClient(addr string) (valkey.Client, error) {
	return valkey.NewClient(valkey.ClientOption{InitAddress: []string{addr}, DisableCache: true})
}

// newBus is a Bus over c with cfg.
func newBus(t *testing.T, c valkey.Client, cfg bus.Config) *bus.Bus {
	t.Helper()
	b, err := bus.New(c, cfg)
	require.NoError(t, err)
	return b
}

// serverMillis reads the server's clock as the scripts do.
func serverMillis(t *testing.T, c valkey.Client) int64 {
	t.Helper()
	tm, err := c.Do(context.Background(), c.B().Time().Build()).AsStrSlice()
	require.NoError(t, err)
	sec, _ := strconv.ParseInt(tm[0], 10, 64)
	usec, _ := strconv.ParseInt(tm[1], 10, 64)
	return sec*1000 + usec/1000
}

// scanAll returns every key on every primary (every node of a cluster) that contains any of
// the substrings.
func scanAll(t *testing.T, c valkey.Client, substrings ...string) []string {
	t.Helper()
	ctx := context.Background()
	seen := map[string]bool{}
	var out []string
	for _, node := range c.Nodes() {
		var cursor uint64
		for {
			e, err := node.Do(ctx, node.B().Scan().Cursor(cursor).Count(1000).Build()).AsScanEntry()
			require.NoError(t, err)
			for _, k := range e.Elements {
				for _, s := range substrings {
					if strings.Contains(k, s) && !seen[k] {
						seen[k] = true
						out = append(out, k)
					}
				}
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
	return out
}

// row reads a job row with HGETALL.
func row(t *testing.T, c valkey.Client, q keys.Queue, id keys.JobID) map[string]string {
	t.Helper()
	k, err := q.Job(id)
	require.NoError(t, err)
	m, err := c.Do(context.Background(), c.B().Hgetall().Key(k).Build()).AsStrMap()
	require.NoError(t, err)
	return m
}

// score reads id's score in a set; ok is false when the set does not hold it.
func score(t *testing.T, c valkey.Client, key string, id keys.JobID) (int64, bool) {
	t.Helper()
	f, err := c.Do(context.Background(), c.B().Zscore().Key(key).Member(id.String()).Build()).AsFloat64()
	if valkey.IsValkeyNil(err) {
		return 0, false
	}
	require.NoError(t, err)
	return int64(f), true
}

func payloads(n int, prefix string) []bus.NewJob {
	out := make([]bus.NewJob, n)
	for i := range out {
		out[i].Payload = []byte(prefix + strconv.Itoa(i))
	}
	return out
}
