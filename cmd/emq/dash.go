package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
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
				return err
			}
			fmt.Fprintf(a.out, "%s: dashboard on http://%s%s/ (Ctrl-C stops it)\n", progName, listen, prefix)
			return dash.ServeListener(ctx, ln, cfg)
		},
	}
	c.Flags().StringVar(&listen, "listen", ":8080", "address to serve the dashboard on")
	c.Flags().StringVar(&prefix, "prefix", "", "path prefix to serve under, like /echo")
	c.Flags().BoolVar(&readOnly, "read-only", false, "show only: refuse every action")
	return c
}
