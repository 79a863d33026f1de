package bus

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
)

func jsonOf(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

// TestWorkersScriptsKeys: the stats scripts declare exactly the one key the reporter and
// WorkerStats pass, the queue's workers hash; and the snapshot the reporter sends is an object
// the script accepts (it begins with {" and has no at or exp).
func TestWorkersScriptsKeys(t *testing.T) {
	t.Parallel()
	for _, sc := range []*lua.Script{scWorkersReport, scWorkersRead} {
		s, h := sc.Name, sc.Header
		require.Len(t, h.Keys, 1, s)
		k, err := keys.Parse(strings.Replace(h.Keys[0].Name, "<q>", "orders", 1))
		require.NoError(t, err)
		require.Equal(t, keys.Workers, k.Type, s)
		require.Equal(t, keys.MustQueue("orders").Workers(), k.String())
	}
	body, err := jsonOf(&workerSnapshot{V: 1, Kinds: []string{"a"}})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(body, `{"v":1,`), body)
	require.NotContains(t, body, `"at"`)
	require.NotContains(t, body, `"exp"`)
}
