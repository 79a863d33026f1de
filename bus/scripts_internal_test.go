package bus

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
)

// TestScriptKeysMatchHeaders: the KEYS the Go side passes are, in order, the KEYS each
// script's header declares; and every script of the bundle whose first key is a queue key is
// one the bus knows.
func TestScriptKeysMatchHeaders(t *testing.T) {
	t.Parallel()
	queueTypes := map[keys.Type]bool{keys.Pending: true, keys.Active: true, keys.Schedule: true, keys.Dead: true, keys.Meta: true, keys.Wake: true,
		keys.Flow: true, keys.Lanes: true}
	for _, s := range lua.All() {
		var declared []keys.Type
		for _, p := range s.Header.Keys {
			k, err := keys.Parse(strings.NewReplacer("<q>", "orders", "<table>", "users", "<id>", "1", "<name>", "eod", "<lane>", "acme").Replace(p.Name))
			require.NoError(t, err, "%s: %s", s.Name, p.Name)
			declared = append(declared, k.Type)
		}
		if len(declared) == 0 || !queueTypes[declared[0]] {
			continue // not a queue script (the cache's scripts live here too)
		}
		want, ok := scriptKeys[s]
		require.True(t, ok, "%s is a queue script the bus does not know", s.Name)
		require.Equal(t, want, declared, s.Name)
	}
	require.Len(t, scriptKeys, 28)
}
