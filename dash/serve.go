package dash

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// Serve runs a dashboard with cfg as a standalone server on addr (":8080") until ctx ends,
// then shuts it down, giving requests in flight up to 5 seconds, and closes the dashboard. It
// is what `emq dash --listen :8080` runs. With a Prefix, "/" redirects to it. It answers
// the error of the listener, or nil after a shutdown by ctx.
func Serve(ctx context.Context, addr string, cfg Config) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return ServeListener(ctx, ln, cfg)
}

// ServeListener is [Serve] on a listener the caller opened; it closes ln.
func ServeListener(ctx context.Context, ln net.Listener, cfg Config) error {
	d, err := New(cfg)
	if err != nil {
		ln.Close()
		return err
	}
	defer d.Close()
	mux := http.NewServeMux()
	mux.Handle(d.cfg.Prefix+"/", d)
	if d.cfg.Prefix != "" {
		mux.Handle("/{$}", http.RedirectHandler(d.cfg.Prefix+"/", http.StatusFound))
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	shutDown := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(shutDown)
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	})
	defer stop()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	// Serve returns at once when Shutdown starts: wait for the requests in flight.
	<-shutDown
	return nil
}
