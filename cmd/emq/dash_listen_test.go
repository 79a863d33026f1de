package main

import (
	"bufio"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/internal/valkeytest"
)

// TestDashJSONAndPortZero: emq dash --json prints one JSON document (every command takes
// --json), and the address it prints is the one it listens on, a port chosen by the system
// (--listen 127.0.0.1:0) included.
func TestDashJSONAndPortZero(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Shared(t)
	cmd := exec.Command(emqBin, "dash", "--listen", "127.0.0.1:0", "--json")
	cmd.Env = append(os.Environ(), "VALKEY_ADDR="+srv.Addr)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(stdout)
	require.True(t, sc.Scan(), "a line on stdout")
	var got struct {
		URL string `json:"url"`
	}
	require.NoErrorf(t, json.Unmarshal(sc.Bytes(), &got), "--json printed %q", sc.Text())
	require.True(t, strings.HasPrefix(got.URL, "http://127.0.0.1:"), got.URL)
	require.NotContains(t, got.URL, "127.0.0.1:0/", "the port it listens on")
	resp, err := http.Get(got.URL)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		require.NoError(t, err, "exit 0 on SIGINT")
	case <-time.After(15 * time.Second):
		t.Fatal("emq dash did not exit on SIGINT")
	}
}

// TestDashListensOnLoopback: without --listen, the dashboard, whose actions have no
// authentication of their own, is served on loopback only.
func TestDashListensOnLoopback(t *testing.T) {
	a := &app{getenv: func(string) string { return "" }}
	dash, _, err := a.root().Find([]string{"dash"})
	require.NoError(t, err)
	listen := dash.Flags().Lookup("listen")
	require.NotNil(t, listen)
	host, _, err := net.SplitHostPort(listen.DefValue)
	require.NoError(t, err)
	require.True(t, net.ParseIP(host).IsLoopback(), "default --listen %q", listen.DefValue)
}
