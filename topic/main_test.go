package topic_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/topic"
)

func TestMain(m *testing.M) { valkeytest.Main(m) }

// setup is the start of a test on one target: a context, the target's client, Topics over it
// with cfg, and a name that no other test uses.
func setup(t *testing.T, tg valkeytest.Target, cfg topic.Config) (context.Context, valkey.Client, *topic.Topics, string) {
	t.Helper()
	return context.Background(), tg.Client, newTopics(t, tg.Client, cfg), valkeytest.TestName(t)
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
