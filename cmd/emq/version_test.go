package main

import (
	"regexp"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestVersion: emq --version names the build (a module version, or "(devel)" and the
// revision for a build from a checkout) and the Go version, and needs no server.
func TestVersion(t *testing.T) {
	t.Parallel()
	r := emq(t, "127.0.0.1:1", "--version")
	require.Equal(t, exitOK, r.code, r.err)
	require.Regexp(t, `^emq version (v\d+\.\d+\.\d+\S*|\(devel\)( [0-9a-f]{12}(\+modified)?)?) \(`+regexp.QuoteMeta(runtime.Version())+`\)\n$`, r.out)
}
