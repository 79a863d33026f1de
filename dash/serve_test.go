package dash_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/dash"
	"github.com/echocache/echocache/internal/valkeytest"
)

// TestServe: the standalone server answers the overview under its prefix, redirects "/" to
// it, and returns nil once its context ends.
func TestServe(t *testing.T) {
	t.Parallel()
	b, err := bus.New(valkeytest.Shared(t).Client(t), bus.Config{})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- dash.ServeListener(ctx, ln, dash.Config{Bus: b, Prefix: "/ops"}) }()
	base := "http://" + ln.Addr().String()
	resp, err := http.Get(base + "/")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "/ops/", resp.Request.URL.Path, "redirected to the prefix")
	require.Contains(t, string(body), "Queues")
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	require.Error(t, dash.Serve(context.Background(), "127.0.0.1:bad", dash.Config{Bus: b}))
	_, err = net.Dial("tcp", ln.Addr().String())
	require.Error(t, err, "the listener is closed")
}
