package keys_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/keys"
)

// TestGrammarForms: every type of the grammar has a form, a value type and a line of doc, and
// its form, with the placeholders filled in, parses back to that type. A type added without
// its grammar entry fails here.
func TestGrammarForms(t *testing.T) {
	t.Parallel()
	fill := strings.NewReplacer("<table>", "orders", "<q>", "orders", "<topic>", "orders",
		"<id>", "42", "<JOB id>", keys.NewJobID().String(), "<key>", "k", "<name>", "eod", "<shard>", "3", "<lane>", "acme")
	var seen []keys.Type
	for typ := keys.Type(1); !strings.HasPrefix(typ.String(), "Type("); typ++ {
		seen = append(seen, typ)
		require.NotEmpty(t, typ.Form(), "%s has no form", typ)
		require.Contains(t, []string{"string", "hash", "zset", "list", "channel"}, typ.Value(), "%s", typ)
		require.NotEmpty(t, typ.Doc(), "%s", typ)
		k, err := keys.Parse(fill.Replace(typ.Form()))
		require.NoError(t, err, "%s: %s", typ, typ.Form())
		require.Equal(t, typ, k.Type, typ.Form())
		if strings.Contains(typ.Form(), "{") {
			require.Equal(t, "orders", k.Name, typ.Form())
		} else {
			require.Empty(t, k.Name, "%s: a registry has no hash tag", typ.Form())
			require.Contains(t, []keys.Type{keys.Queues, keys.Tables}, typ, "only the registries are outside a hash tag")
		}
	}
	require.Equal(t, seen, keys.Types())
	require.Empty(t, keys.Type(0).Form())
}
