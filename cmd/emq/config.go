package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/echocache/echocache/bus"
)

// queueConfig is a queue's own settings, as emq config prints them.
type queueConfig struct {
	Queue       string `json:"queue"`
	MaxAttempts int    `json:"max_attempts"`
	DeadLimit   int    `json:"dead_limit"`
}

func configCmd(a *app) *cobra.Command {
	var maxAttempts, deadLimit int
	c := &cobra.Command{
		Use:   "config <queue> [--max-attempts N] [--dead-limit N]",
		Short: "Read or set a queue's max attempts and dead limit",
		Long: `Print a queue's own settings, after setting those given:

  --max-attempts N  the queue's maximum of attempts per job, used when a worker or a call names
                    none; 0 clears it (the bus's Config.MaxAttempts applies, 25 by default)
  --dead-limit N    the most dead jobs the queue keeps: a job that dies past it deletes the
                    oldest other dead jobs (by mint order) for good, with their failure
                    histories, up to 100 more than it adds at each death; 0 clears it (dead
                    jobs are kept until retried or purged, the default)

Every worker and process of the queue sees a setting at once: it lives in the queue's meta.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			queue := args[0]
			setMax, setDead := cmd.Flags().Changed("max-attempts"), cmd.Flags().Changed("dead-limit")
			if setMax && maxAttempts < 0 {
				return usagef("--max-attempts: %d is negative", maxAttempts)
			}
			if setDead && deadLimit < 0 {
				return usagef("--dead-limit: %d is negative", deadLimit)
			}
			ctx, cancel, err := a.openQueue(queue)
			if err != nil {
				return err
			}
			defer cancel()
			if setMax {
				if err := a.bus.SetMaxAttempts(ctx, queue, maxAttempts); err != nil {
					return err
				}
			}
			if setDead {
				if err := a.bus.SetDeadLimit(ctx, queue, deadLimit); err != nil {
					return err
				}
			}
			counts, err := a.bus.Counts(ctx, queue)
			if err != nil {
				return err
			}
			cfg := queueConfig{Queue: queue, MaxAttempts: counts.MaxAttempts, DeadLimit: counts.DeadLimit}
			return a.emit(cfg, func() {
				fmt.Fprintf(a.out, "%s: max attempts %s, dead limit %s\n", queue,
					orNone(cfg.MaxAttempts, fmt.Sprintf("none of its own (the bus default, %d unless configured)", bus.DefaultMaxAttempts)),
					orNone(cfg.DeadLimit, "none (every dead job is kept)"))
			})
		},
	}
	c.Flags().IntVar(&maxAttempts, "max-attempts", 0, "set the queue's maximum of attempts per job (0 clears it)")
	c.Flags().IntVar(&deadLimit, "dead-limit", 0, "set the most dead jobs the queue keeps (0 clears it)")
	return c
}

// orNone is n in decimal, or none when n is 0.
func orNone(n int, none string) string {
	if n == 0 {
		return none
	}
	return fmt.Sprint(n)
}
