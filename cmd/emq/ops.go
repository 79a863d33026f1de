package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/keys"
)

// The verbs that change a queue: retry, purge, pause, resume, cancel.

// changed is what a verb that changes a queue prints.
type changed struct {
	Queue string `json:"queue"`
	// Lane is the lane emq lane pause and resume changed.
	Lane string `json:"lane,omitempty"`
	// Schedule is the periodic schedule emq periodic pause, resume and remove changed.
	Schedule string   `json:"schedule,omitempty"`
	Action   string   `json:"action"`
	IDs      []string `json:"ids,omitempty"`
	Count    int      `json:"count"`
	// State is the state cancel found the job in.
	State string `json:"state,omitempty"`
}

func (a *app) printChanged(c changed) error {
	return a.emit(c, func() {
		switch {
		case c.Lane != "":
			fmt.Fprintf(a.out, "%s: lane %s %s\n", c.Queue, c.Lane, c.Action)
		case c.Schedule != "":
			fmt.Fprintf(a.out, "%s: periodic schedule %s %s\n", c.Queue, c.Schedule, c.Action)
		case c.State != "":
			fmt.Fprintf(a.out, "%s: %s %s (was %s)\n", c.Queue, c.Action, c.IDs[0], c.State)
		case c.Action == "paused" || c.Action == "resumed":
			fmt.Fprintf(a.out, "%s: %s\n", c.Queue, c.Action)
		case c.Action == "dropped":
			fmt.Fprintf(a.out, "%s: dropped (%d keys deleted)\n", c.Queue, c.Count)
		default:
			fmt.Fprintf(a.out, "%s: %s %d jobs\n", c.Queue, c.Action, c.Count)
		}
	})
}

func parseJobIDs(args []string) ([]keys.JobID, error) {
	ids := make([]keys.JobID, len(args))
	for i, s := range args {
		var err error
		if ids[i], err = parseJobID(s); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

func idStrings(ids []keys.JobID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.String()
	}
	return out
}

func retryCmd(a *app) *cobra.Command {
	var all bool
	c := &cobra.Command{
		Use:   "retry <queue> <id>... | retry <queue> --all",
		Short: "Bring dead jobs back to pending",
		Long: `Bring the named dead jobs back to pending, all or nothing (exit 5 when one is not dead), or
with --all every job dead when the command starts (their ids are read before it asks), oldest
first, a page at a time; one that left dead meanwhile is skipped. --all asks for confirmation
on a terminal and refuses without one unless --yes. A retried job keeps its attempts, so it
goes back to dead on its next failure unless the maximum is raised.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			queue := args[0]
			if all == (len(args) > 1) {
				return usagef("retry: name job ids or --all, not both nor neither")
			}
			ids, err := parseJobIDs(args[1:])
			if err != nil {
				return err
			}
			ctx, cancel, err := a.openQueue(queue)
			if err != nil {
				return err
			}
			defer func() { cancel() }()
			if !all {
				n, err := a.bus.RetryDead(ctx, queue, ids...)
				if err != nil {
					return err
				}
				return a.printChanged(changed{Queue: queue, Action: "retried", IDs: idStrings(ids), Count: n})
			}
			dead, err := a.deadIDs(ctx, queue)
			if err != nil {
				return err
			}
			if ctx, cancel, err = a.confirmed(fmt.Sprintf("retry all %d dead jobs of %s", len(dead), queue), cancel); err != nil {
				return err
			}
			total, err := a.eachDead(ctx, dead, func(ctx context.Context, batch []keys.JobID) (int, error) {
				return a.bus.RetryDead(ctx, queue, batch...)
			})
			if err != nil {
				return err
			}
			return a.printChanged(changed{Queue: queue, Action: "retried", Count: total})
		},
	}
	c.Flags().BoolVar(&all, "all", false, "retry every dead job")
	c.Flags().BoolVar(&a.yes, "yes", false, "do not ask for confirmation")
	return c
}

func purgeCmd(a *app) *cobra.Command {
	var all bool
	c := &cobra.Command{
		Use:   "purge <queue> <id>... | purge <queue> --all",
		Short: "Delete dead jobs for good",
		Long: `Delete the named dead jobs for good (row and id), all or nothing (exit 5 when one is not
dead), or with --all every job dead when the command starts (their ids are read before it
asks; one that left dead meanwhile is skipped). It asks for confirmation on a terminal and
refuses without one unless --yes.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			queue := args[0]
			if all == (len(args) > 1) {
				return usagef("purge: name job ids or --all, not both nor neither")
			}
			ids, err := parseJobIDs(args[1:])
			if err != nil {
				return err
			}
			ctx, cancel, err := a.openQueue(queue)
			if err != nil {
				return err
			}
			defer func() { cancel() }()
			if !all {
				if ctx, cancel, err = a.confirmed(fmt.Sprintf("purge %d dead jobs of %s", len(ids), queue), cancel); err != nil {
					return err
				}
				gone, err := a.bus.PurgeDead(ctx, queue, &bus.PurgeOpts{IDs: ids})
				if err != nil {
					return err
				}
				return a.printChanged(changed{Queue: queue, Action: "purged", IDs: idStrings(gone), Count: len(gone)})
			}
			dead, err := a.deadIDs(ctx, queue)
			if err != nil {
				return err
			}
			if ctx, cancel, err = a.confirmed(fmt.Sprintf("purge all %d dead jobs of %s", len(dead), queue), cancel); err != nil {
				return err
			}
			total, err := a.eachDead(ctx, dead, func(ctx context.Context, batch []keys.JobID) (int, error) {
				gone, err := a.bus.PurgeDead(ctx, queue, &bus.PurgeOpts{IDs: batch})
				return len(gone), err
			})
			if err != nil {
				return err
			}
			return a.printChanged(changed{Queue: queue, Action: "purged", Count: total})
		},
	}
	c.Flags().BoolVar(&all, "all", false, "purge every dead job")
	c.Flags().BoolVar(&a.yes, "yes", false, "do not ask for confirmation")
	return c
}

func pauseCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "pause <queue>",
		Short: "Stop a queue from handing out work",
		Long:  `Pause a queue: claims hand out nothing until emq resume. Producers may still enqueue. Pausing a paused queue is not an error.`,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.queueVerb(args[0], "paused", (*bus.Bus).Pause)
		},
	}
}

func resumeCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "resume <queue>",
		Short: "Let a paused queue hand out work again",
		Long:  `Resume a paused queue and wake its idle workers. Resuming a running queue is not an error.`,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.queueVerb(args[0], "resumed", (*bus.Bus).Resume)
		},
	}
}

// queueVerb runs pause or resume on queue.
func (a *app) queueVerb(queue, action string, verb func(b *bus.Bus, ctx context.Context, queue string) error) error {
	ctx, cancel, err := a.openQueue(queue)
	if err != nil {
		return err
	}
	defer cancel()
	if err := verb(a.bus, ctx, queue); err != nil {
		return err
	}
	return a.printChanged(changed{Queue: queue, Action: action})
}

func cancelCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "cancel <queue> <id>",
		Short: "Cancel a waiting or running job",
		Long: `Cancel a job: a pending or scheduled job is deleted, and the state it had is printed. A
running (active) job is marked cancelling and "cancelling" is printed: its worker stops the
handler at its next heartbeat (the handler's context is cancelled with the cause
bus.ErrCancelled) and the job goes to dead with the failure "cancelled", unless the handler
completes it first; a holder that is gone leaves it to its lease running out. Cancelling a job
that is cancelling already prints the same and changes nothing. Exit 3 when the job has no
row, 5 when its state does not allow it (a dead job: purge it).`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			queue := args[0]
			id, err := parseJobID(args[1])
			if err != nil {
				return err
			}
			ctx, cancel, err := a.openQueue(queue)
			if err != nil {
				return err
			}
			defer cancel()
			state, err := a.bus.Cancel(ctx, queue, id)
			if err != nil {
				return err
			}
			action := "cancelled"
			if state == bus.StateActive || state == bus.StateCancelling {
				action = "cancelling"
			}
			return a.printChanged(changed{Queue: queue, Action: action, IDs: []string{id.String()}, Count: 1, State: string(state)})
		},
	}
}

func dropCmd(a *app) *cobra.Command {
	var force bool
	c := &cobra.Command{
		Use:   "drop <queue> [--force]",
		Short: "Delete a whole queue for good",
		Long: `Delete a queue and everything in it for good: its jobs in every set with their rows,
failure histories, results and idempotency guards, its settings, lanes, periodic schedules and
workers' stats; then remove it from the registry. A queue with claimed (running) jobs is
refused (exit 5) unless --force; their outcomes then find no job. Stop the queue's producers,
workers and schedulers first: what they write meanwhile may survive. It asks for confirmation
on a terminal and refuses without one unless --yes.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			queue := args[0]
			ctx, cancel, err := a.openQueue(queue)
			if err != nil {
				return err
			}
			defer func() { cancel() }()
			counts, err := a.bus.Counts(ctx, queue)
			if err != nil {
				return err
			}
			what := fmt.Sprintf("drop queue %s and its %d jobs (%d pending, %d active, %d scheduled, %d dead)", queue,
				counts.Pending+counts.Active+counts.Scheduled+counts.Dead, counts.Pending, counts.Active, counts.Scheduled, counts.Dead)
			if ctx, cancel, err = a.confirmed(what, cancel); err != nil {
				return err
			}
			n, err := a.bus.DropQueue(ctx, queue, &bus.DropOpts{Force: force})
			if err != nil {
				return err
			}
			return a.printChanged(changed{Queue: queue, Action: "dropped", Count: int(n)})
		},
	}
	c.Flags().BoolVar(&force, "force", false, "drop the queue even while jobs of it are claimed")
	c.Flags().BoolVar(&a.yes, "yes", false, "do not ask for confirmation")
	return c
}
