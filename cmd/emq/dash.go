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

// defaultDashListen is emq dash's --listen: loopback, since the dashboard's actions (purge,
// cancel) have no authentication of their own.
const defaultDashListen = "127.0.0.1:8080"

func dashCmd(a *app) *cobra.Command {
	var (
		listen, prefix string
		readOnly       bool
	)
	c := &cobra.Command{
		Use:   "dash",
		Short: "Serve the web dashboard",
		Long: `Serve the web dashboard (package dash) on --listen until interrupted: every queue and
table of the server, a page per queue, job and table, live counts, and the actions retry,
purge, pause, resume and cancel behind a confirmation and CSRF checks. --read-only refuses
every action. The dashboard has no authentication of its own, so it listens on this machine
alone by default (127.0.0.1:8080); serve it further (--listen :8080) only behind yours.`,
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
	c.Flags().StringVar(&listen, "listen", defaultDashListen, "address to serve the dashboard on (:8080 for every interface)")
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
