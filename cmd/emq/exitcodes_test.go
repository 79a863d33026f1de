package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
)

// TestTimeoutFlagNotPositive: --timeout 0 or negative is a usage error (exit 2), as
// --connect-timeout is, not a server that does not answer (exit 4).
func TestTimeoutFlagNotPositive(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Shared(t)
	for _, v := range []string{"0", "-1s"} {
		r := emq(t, srv.Addr, "queues", "--timeout", v)
		require.Equalf(t, exitUsage, r.code, "--timeout %s: %s", v, r.err)
		require.Contains(t, r.err, "--timeout")
	}
}

// TestWatchServerGone: emq watch on a server that goes away mid-run ends, with exit 4 (the
// server is unreachable), not 1.
func TestWatchServerGone(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Start(t, valkeytest.WithoutPersistence())
	b, err := bus.New(srv.Client(t), bus.Config{})
	require.NoError(t, err)
	queue := valkeytest.TestName(t)
	_, err = b.Enqueue(context.Background(), queue, []byte("x"), nil)
	require.NoError(t, err)

	cmd := exec.Command(emqBin, "watch", queue, "--json", "--interval", "50ms", "--connect-timeout", "1s", "--timeout", "2s")
	cmd.Env = append(os.Environ(), "VALKEY_ADDR="+srv.Addr)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	sc := bufio.NewScanner(stdout)
	require.True(t, sc.Scan(), "a first frame")
	var f watchFrame
	require.NoError(t, json.Unmarshal(sc.Bytes(), &f))
	require.NoError(t, srv.Kill())
	go func() {
		for sc.Scan() { // drain the frames printed before the kill was seen
		}
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		ee, ok := err.(*exec.ExitError)
		require.Truef(t, ok, "watch ended with %v", err)
		require.Equal(t, exitUnreachable, ee.ExitCode())
	case <-time.After(30 * time.Second):
		t.Fatal("watch did not end after its server went away")
	}
}
