package main

import (
	"bytes"
	"io"
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

// TestDash: emq dash serves the dashboard on --listen, under --prefix, read-only when asked,
// and exits 0 on SIGINT.
func TestDash(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Shared(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(emqBin, "dash", "--listen", addr, "--prefix", "/ops", "--read-only")
	cmd.Env = append(os.Environ(), "VALKEY_ADDR="+srv.Addr)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var body string
	waitFor(t, "the dashboard to answer", func() bool {
		resp, err := http.Get("http://" + addr + "/ops/")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode == http.StatusOK
	})
	require.Contains(t, body, "Queues")
	require.Contains(t, body, "read-only")
	resp, err := http.Post("http://"+addr+"/ops/queues/q/pause", "application/x-www-form-urlencoded", strings.NewReader("confirm=yes"))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		require.NoError(t, err, "exit 0 on SIGINT: %s", out.String())
	case <-time.After(15 * time.Second):
		t.Fatal("emq dash did not exit on SIGINT")
	}
	require.Contains(t, out.String(), "dashboard on http://"+addr+"/ops/")
}
