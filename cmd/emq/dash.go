package main

import (
	"context"
	"fmt"
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
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			fmt.Fprintf(a.out, "%s: dashboard on http://%s%s/ (Ctrl-C stops it)\n", progName, listen, prefix)
			return dash.Serve(ctx, listen, dash.Config{Bus: a.bus, Client: a.client, Prefix: prefix, ReadOnly: readOnly})
		},
	}
	c.Flags().StringVar(&listen, "listen", ":8080", "address to serve the dashboard on")
	c.Flags().StringVar(&prefix, "prefix", "", "path prefix to serve under, like /echo")
	c.Flags().BoolVar(&readOnly, "read-only", false, "show only: refuse every action")
	return c
}
