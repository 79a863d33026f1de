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

// TestServeDrainsInFlight: once its context ends, ServeListener gives a request in flight
// time to finish (up to 5 s, as Serve documents) and returns only after it is answered;
// emq dash exits when it returns, so returning at once cuts the request off.
func TestServeDrainsInFlight(t *testing.T) {
	t.Parallel()
	b, err := bus.New(valkeytest.Shared(t).Client(t), bus.Config{})
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	entered, release := make(chan struct{}), make(chan struct{})
	cfg := dash.Config{Bus: b, Prefix: "/ops", Authorize: func(r *http.Request, _ dash.Action) bool {
		if r.URL.Query().Get("slow") == "1" {
			close(entered)
			<-release
		}
		return true
	}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- dash.ServeListener(ctx, ln, cfg) }()

	type answer struct {
		code int
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String() + "/ops/?slow=1")
		if err != nil {
			got <- answer{0, err}
			return
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
		got <- answer{resp.StatusCode, nil}
	}()
	<-entered
	cancel()
	select {
	case err := <-done:
		close(release)
		t.Fatalf("ServeListener returned (%v) while a request was in flight", err)
	case <-time.After(500 * time.Millisecond):
	}
	close(release)
	a := <-got
	require.NoError(t, a.err)
	require.Equal(t, http.StatusOK, a.code)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("ServeListener did not return after the request in flight was answered")
	}
}
