package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/echocache/echocache/dash"
)

func dashCmd(a *app) *cobra.Command {
	var (
		listen, prefix string
		readOnly       bool
	)
	c := &cobra.Command{
		Use:   "dash",
		Short: "Serve the web dashboard",
		Long: `Serve the web dashboard (package dash) on --listen (default :8080) until interrupted: every
queue and table of the server, a page per queue, job and table, live counts, and the actions
retry, purge, pause, resume and cancel behind a confirmation and CSRF checks. --read-only
refuses every action. Put it behind your own authentication: it has none of its own.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.connect(); err != nil {
				return err
			}
			cfg := dash.Config{Bus: a.bus, Client: a.client, Prefix: prefix, ReadOnly: readOnly}
			if err := cfg.Validate(); err != nil {
				return usagef("--prefix: %v", err) // the one setting of the config a flag can get wrong
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return &exitError{exitFailure, err} // not the server: exit 1, not 4
			}
			url := "http://" + servedAddr(listen, ln.Addr()) + prefix + "/"
			if a.json {
				if err := a.printJSONLine(struct {
					URL string `json:"url"`
				}{url}); err != nil {
					ln.Close()
					return err
				}
			} else {
				fmt.Fprintf(a.out, "%s: dashboard on %s (Ctrl-C stops it)\n", progName, url)
			}
			return dash.ServeListener(ctx, ln, cfg)
		},
	}
	c.Flags().StringVar(&listen, "listen", ":8080", "address to serve the dashboard on")
	c.Flags().StringVar(&prefix, "prefix", "", "path prefix to serve under, like /echo")
	c.Flags().BoolVar(&readOnly, "read-only", false, "show only: refuse every action")
	return c
}

// servedAddr is the host:port the dashboard is reached at: the host of --listen (localhost
// when it names none) and the port the listener got (the system's choice for port 0).
func servedAddr(listen string, got net.Addr) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if tcp, ok := got.(*net.TCPAddr); ok {
		port = strconv.Itoa(tcp.Port)
	}
	if host == "" {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}
