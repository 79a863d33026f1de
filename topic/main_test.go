package topic_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/topic"
)

func TestMain(m *testing.M) { valkeytest.Main(m) }

// target is one deployment the tests run against.
type target struct {
	name   string
	client valkey.Client
}

// onTargets runs fn as parallel subtests against the shared standalone server and the shared
// loopback cluster, so every case holds on both.
func onTargets(t *testing.T, fn func(t *testing.T, tg target)) {
	t.Helper()
	for _, name := range []string{"standalone", "cluster"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var c valkey.Client
			if name == "cluster" {
				c = valkeytest.SharedCluster(t).Client(t)
			} else {
				c = valkeytest.Shared(t).Client(t)
			}
			fn(t, target{name: name, client: c})
		})
	}
}

// setup is the start of a test on one target: a context, the target's client, Topics over it
// with cfg, and a name that no other test uses.
func setup(t *testing.T, tg target, cfg topic.Config) (context.Context, valkey.Client, *topic.Topics, string) {
	t.Helper()
	return context.Background(), tg.client, newTopics(t, tg.client, cfg), uniqueName(t)
}

// newPlainClient is a standalone client that the caller closes (valkeytest's clients close
// on cleanup, too late for a leak check).
func newPlainClient(addr string) (valkey.Client, error) {
	return valkey.NewClient(valkey.ClientOption{InitAddress: []string{addr}, DisableCache: true})
}

// newTopics is Topics over c with cfg.
func newTopics(t *testing.T, c valkey.Client, cfg topic.Config) *topic.Topics {
	t.Helper()
	tp, err := topic.New(c, cfg)
	require.NoError(t, err)
	return tp
}

// uniqueName derives a topic, table or queue name from the test's name: [A-Za-z0-9_.-], at
// most 64 bytes (long names keep a hash suffix so they stay unique).
func uniqueName(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, c := range t.Name() {
		if c < 128 && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			b.WriteRune(c)
		} else {
			b.WriteByte('_')
		}
	}
	name := b.String()
	if len(name) > keys.MaxNameLen {
		sum := sha1.Sum([]byte(name))
		name = name[:keys.MaxNameLen-9] + "." + hex.EncodeToString(sum[:4])
	}
	return name
}
