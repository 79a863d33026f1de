package main

import (
	"context"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/keys"
)

// queueRow is one queue as emq queues prints it.
type queueRow struct {
	Name        string    `json:"name"`
	FirstSeen   time.Time `json:"first_seen"`
	Pending     int64     `json:"pending"`
	Active      int64     `json:"active"`
	Scheduled   int64     `json:"scheduled"`
	Dead        int64     `json:"dead"`
	Paused      bool      `json:"paused"`
	MaxAttempts int       `json:"max_attempts"`
	DeadLimit   int       `json:"dead_limit"`
}

func queuesCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "queues",
		Short: "List the queues of the registry with their counts",
		Long: `List every queue of the registry (emq:queues), sorted by name, with the sizes of its
pending, active, scheduled and dead sets and whether it is paused (with --json, its own max
attempts and dead limit too, 0 for none: see emq config). Queues only raw scripts wrote to are
not in the registry.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.connect(); err != nil {
				return err
			}
			ctx, cancel := a.ctx()
			defer cancel()
			qs, err := a.bus.Queues(ctx)
			if err != nil {
				return err
			}
			rows := make([]queueRow, 0, len(qs))
			for _, q := range qs {
				c, err := a.bus.Counts(ctx, q.Name)
				if err != nil {
					return err
				}
				rows = append(rows, queueRow{Name: q.Name, FirstSeen: q.FirstSeen, Pending: c.Pending, Active: c.Active,
					Scheduled: c.Scheduled, Dead: c.Dead, Paused: c.Paused, MaxAttempts: c.MaxAttempts, DeadLimit: c.DeadLimit})
			}
			return a.emit(rows, func() {
				t := [][]string{{"QUEUE", "PENDING", "ACTIVE", "SCHEDULED", "DEAD", "PAUSED", "FIRST SEEN"}}
				for _, r := range rows {
					t = append(t, []string{r.Name, itoa(r.Pending), itoa(r.Active), itoa(r.Scheduled), itoa(r.Dead),
						yesNo(r.Paused), fmtTime(r.FirstSeen)})
				}
				a.table(t)
			})
		},
	}
}

// openQueue connects, and starts the command's deadline, for a command on the queue name,
// which must be in the registry (requireQueue). The caller defers cancel; on error there is
// nothing to cancel.
func (a *app) openQueue(name string) (ctx context.Context, cancel context.CancelFunc, err error) {
	if err := a.connect(); err != nil {
		return nil, nil, err
	}
	ctx, cancel = a.ctx()
	if err := a.requireQueue(ctx, name); err != nil {
		cancel()
		return nil, nil, err
	}
	return ctx, cancel, nil
}

// requireQueue refuses a queue name that is malformed (exit 2) or not in the registry
// (exit 3), so that a typo does not read as an empty queue.
func (a *app) requireQueue(ctx context.Context, name string) error {
	if err := keys.ValidateName(name); err != nil {
		return usagef("queue: %v", err)
	}
	qs, err := a.bus.Queues(ctx)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(qs, func(q bus.QueueInfo) bool { return q.Name == name }) {
		return notFoundf("queue %s is not in the registry (%s): see emq queues", name, keys.QueueRegistry())
	}
	return nil
}

// parseJobID reads a job id argument (exit 2 when malformed).
func parseJobID(s string) (keys.JobID, error) {
	id, err := keys.ParseJobID(s)
	if err != nil {
		return keys.JobID{}, usagef("job id: %v", err)
	}
	return id, nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
