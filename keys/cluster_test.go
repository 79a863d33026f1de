package keys_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

func TestMain(m *testing.M) { valkeytest.Main(m) }

// TestSlotAgreesWithCluster asks a real cluster node for CLUSTER KEYSLOT of 10,000 random keys
// (with and without hash tags, empty tags, nested and unbalanced braces) and compares.
func TestSlotAgreesWithCluster(t *testing.T) {
	t.Parallel()
	cl := valkeytest.SharedCluster(t)
	c := cl.Client(t)
	r := rand.New(rand.NewPCG(7, 11))
	const n = 10_000
	ks := make([]string, n)
	cmds := make(valkey.Commands, n)
	for i := range ks {
		ks[i] = randomSlotKey(r)
		cmds[i] = c.B().ClusterKeyslot().Key(ks[i]).Build()
	}
	for i, res := range c.DoMulti(context.Background(), cmds...) {
		got, err := res.AsInt64()
		require.NoError(t, err)
		require.Equal(t, uint16(got), keys.Slot(ks[i]), "key %q", ks[i])
	}
}

func randomSlotKey(r *rand.Rand) string {
	const alphabet = "ab{}:{}xyz019 é"
	switch r.IntN(4) {
	case 0: // a grammar key
		k, _ := randomKey(r)
		return k
	case 1: // a plain tag
		return "p" + randomString(r, r.IntN(6), "abc") + "{" + randomString(r, 1+r.IntN(8), "xyz01") + "}" + randomString(r, r.IntN(6), "abc")
	case 2: // empty tags, nested and unbalanced braces
		return []string{"{}", "{}x", "a{}b{c}", "{{a}}", "{a{b}c}", "}{a}", "{a", "a}", "{{}}", "x{}{y}"}[r.IntN(10)] + randomString(r, r.IntN(4), "ab{}")
	default:
		return randomString(r, 1+r.IntN(24), alphabet)
	}
}
