package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/lua"
)

// TestProtocolUpToDate regenerates PROTOCOL.md in memory: a header or the grammar changed
// without `make protocol` fails here.
func TestProtocolUpToDate(t *testing.T) {
	want, err := render()
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join("..", "..", "PROTOCOL.md"))
	require.NoError(t, err)
	require.Equal(t, string(want), string(got), "PROTOCOL.md is stale: run `make protocol` and commit it")
}

// TestEveryCodeHasAMeaning: the table of meanings holds no code that no script answers.
func TestEveryCodeHasAMeaning(t *testing.T) {
	_, err := render()
	require.NoError(t, err)
	used := map[string]bool{}
	for _, s := range scriptsForTest() {
		for _, e := range s.Header.Errors {
			used[e.Name] = true
		}
	}
	for c := range codes {
		require.True(t, used[c], "%s has a meaning but no script answers it", c)
	}
}

func scriptsForTest() []*lua.Script { return lua.All() }
