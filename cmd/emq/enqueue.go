package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/echocache/echocache/bus"
)

// enqueued is what emq enqueue prints.
type enqueued struct {
	Queue     string `json:"queue"`
	ID        string `json:"id"`
	Kind      string `json:"kind,omitempty"`
	Duplicate bool   `json:"duplicate"`
}

func enqueueCmd(a *app) *cobra.Command {
	var (
		kind, at, unique string
		opts             bus.EnqueueOpts
	)
	c := &cobra.Command{
		Use:   "enqueue <queue> <payload|->",
		Short: "Enqueue one job",
		Long: `Enqueue one job on a queue (which need not exist yet: the enqueue lists it). The payload is
the argument, or stdin when it is "-". With --kind the payload is wrapped in a task envelope
(kind NUL payload) that a worker routes to the kind's handler; without it the payload is
stored as given. --delay or --at (one of them) schedules it; --unique-key makes the enqueue idempotent for
the bus's unique TTL (default 24 h): a second enqueue answers the first job's id. --lane puts the
job in a lane of the queue (a name like a queue's), --priority gives it a priority from 0 to 3
(3 the most urgent), claimed before the jobs of lower priorities.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			queue, payload := args[0], []byte(args[1])
			if args[1] == "-" {
				b, err := io.ReadAll(a.in)
				if err != nil {
					return fmt.Errorf("reading the payload from stdin: %w", err)
				}
				payload = b
			}
			if kind != "" {
				var err error
				if payload, err = bus.Envelope(kind, payload); err != nil {
					return usagef("--kind: %v", err)
				}
			}
			if at != "" && opts.Delay != 0 {
				return usagef("--delay and --at both schedule the job: give one of them")
			}
			if at != "" {
				t, err := parseAt(at)
				if err != nil {
					return err
				}
				opts.At = t
			}
			opts.UniqueKey = unique
			if err := a.connect(); err != nil {
				return err
			}
			ctx, cancel := a.ctx()
			defer cancel()
			e, err := a.bus.Enqueue(ctx, queue, payload, &opts)
			if err != nil {
				return err
			}
			out := enqueued{Queue: queue, ID: e.ID.String(), Kind: kind, Duplicate: e.Duplicate}
			return a.emit(out, func() {
				if out.Duplicate {
					fmt.Fprintf(a.out, "%s (duplicate: the unique key names this job)\n", out.ID)
					return
				}
				fmt.Fprintln(a.out, out.ID)
			})
		},
	}
	f := c.Flags()
	f.StringVar(&kind, "kind", "", "wrap the payload in a task envelope of this kind")
	f.DurationVar(&opts.Delay, "delay", 0, "run after this delay")
	f.StringVar(&at, "at", "", "run at this time (RFC 3339)")
	f.StringVar(&unique, "unique-key", "", "idempotency key")
	f.StringVar(&opts.Lane, "lane", "", "the job's lane (default: none, the queue's own stream)")
	f.IntVar(&opts.Priority, "priority", 0, "the job's priority, 0 to 3 (3 the most urgent)")
	return c
}
