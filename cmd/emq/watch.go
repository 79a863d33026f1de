package main

import (
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/spf13/cobra"
)

// watchFrame is one refresh of emq watch, as --json prints it (one JSON document a line).
type watchFrame struct {
	At     time.Time    `json:"at"`
	Queues []queueStats `json:"queues"`
}

func watchCmd(a *app) *cobra.Command {
	var (
		interval time.Duration
		count    int
	)
	c := &cobra.Command{
		Use:   "watch [queue]",
		Short: "Refresh emq stats live, with rates",
		Long: `Print emq stats for every queue, or the one named, every --interval (default 2 s), with the
per-second rates between consecutive refreshes once workers have published newer snapshots.
On a terminal the screen is redrawn; otherwise (and with --json, one document a line) each
refresh is appended. It runs until interrupted, or for --count refreshes.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if interval <= 0 {
				return usagef("--interval: %v is not positive", interval)
			}
			if count < 0 {
				return usagef("--count: %d is negative", count)
			}
			if err := a.connect(); err != nil {
				return err
			}
			names, err := a.queueNames(args)
			if err != nil {
				return err
			}
			stop := make(chan os.Signal, 1)
			signal.Notify(stop, os.Interrupt)
			defer signal.Stop(stop)
			redraw := !a.json && isTerminal(os.Stdout) && a.out == os.Stdout
			var prev []queueStats
			for n := 0; count == 0 || n < count; n++ {
				if n > 0 {
					select {
					case <-stop:
						return nil
					case <-time.After(interval):
					}
				}
				rows, err := a.queueStats(names)
				if err != nil {
					return err
				}
				if prev != nil {
					withRates(rows, prev)
				}
				prev = rows
				if a.json {
					if err := a.printJSONLine(watchFrame{At: time.Now(), Queues: rows}); err != nil {
						return err
					}
					continue
				}
				if redraw {
					fmt.Fprint(a.out, "\x1b[H\x1b[2J")
				}
				fmt.Fprintf(a.out, "%s  every %v\n", fmtTime(time.Now()), interval)
				a.statsTable(rows)
				fmt.Fprintln(a.out)
			}
			return nil
		},
	}
	c.Flags().DurationVar(&interval, "interval", 2*time.Second, "time between refreshes")
	c.Flags().IntVar(&count, "count", 0, "stop after this many refreshes (0: until interrupted)")
	return c
}
