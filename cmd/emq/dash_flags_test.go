package main

import (
	"net"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/internal/valkeytest"
)

// TestDashBadFlags: a malformed --prefix is a usage error (exit 2), and neither it nor a
// --listen address that cannot be listened on prints that a dashboard is served.
func TestDashBadFlags(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Shared(t)

	r := emq(t, srv.Addr, "dash", "--listen", "127.0.0.1:0", "--prefix", "echo")
	require.Equal(t, exitUsage, r.code, "stdout %q stderr %q", r.out, r.err)
	require.Contains(t, r.err, "prefix")
	require.NotContains(t, r.out, "dashboard on", "no dashboard is served")

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	r = emq(t, srv.Addr, "dash", "--listen", busy.Addr().String())
	require.Equal(t, exitFailure, r.code, "stdout %q stderr %q", r.out, r.err)
	require.True(t, strings.Contains(r.err, "address already in use"), r.err)
	require.NotContains(t, r.out, "dashboard on", "no dashboard is served")
}
