package lua_test

import (
	"flag"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/lua"
)

var update = flag.Bool("update", false, "rewrite manifest.sha1 from the scripts as they are")

// TestManifest pins every script's SHA1. A changed script changes the protocol: rerun with
// -update and commit the manifest with the script, deliberately.
func TestManifest(t *testing.T) {
	got := lua.ManifestOf(lua.All())
	if *update {
		require.NoError(t, os.WriteFile("manifest.sha1", []byte(got), 0o644))
		return
	}
	require.Equal(t, lua.Manifest(), got, "the bundle changed: run `go test ./lua -run TestManifest -update` and commit manifest.sha1")
}
