package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/keys"
)

// The periodic schedules of a queue: emq periodic lists them, emq periodic pause and resume
// stop and restart one, emq periodic remove deletes one.

// periodicRow is one schedule as emq periodic prints it.
type periodicRow struct {
	Name string `json:"name"`
	// Cron and Zone, or EveryMS: the schedule's spec.
	Cron    string  `json:"cron,omitempty"`
	Zone    string  `json:"zone,omitempty"`
	EveryMS float64 `json:"every_ms,omitempty"`
	// Kind is the task kind a tick enqueues ("" for a raw payload).
	Kind    string `json:"kind,omitempty"`
	Missed  string `json:"missed"`
	CatchUp int    `json:"catch_up,omitempty"`
	Paused  bool   `json:"paused"`
	// Last is the newest tick fired or skipped (or the declaration); Next the next one due,
	// absent when the spec matches no time within five years.
	Last time.Time  `json:"last"`
	Next *time.Time `json:"next,omitempty"`
}

// periodicListing is what emq periodic prints.
type periodicListing struct {
	Queue     string        `json:"queue"`
	Schedules []periodicRow `json:"schedules"`
}

func newPeriodicRow(p bus.PeriodicInfo) periodicRow {
	r := periodicRow{Name: p.Name, Cron: p.Cron, Zone: p.Zone, Kind: p.Kind, Missed: p.Missed.String(),
		Paused: p.Paused, Last: p.Last.UTC(), Next: timePtr(p.Next)}
	if p.Every > 0 {
		r.EveryMS = ms(p.Every)
	}
	if p.Missed == bus.MissedCatchUp {
		r.CatchUp = p.CatchUp
	}
	return r
}

// spec is the schedule as one phrase: "every 5m0s", or "cron 0 22 * * 1-5 (America/New_York)".
func (r periodicRow) spec() string {
	if r.Cron == "" {
		return "every " + time.Duration(r.EveryMS*float64(time.Millisecond)).String()
	}
	zone := r.Zone
	if zone == "" {
		zone = "UTC"
	}
	return fmt.Sprintf("cron %s (%s)", r.Cron, zone)
}

func periodicCmd(a *app) *cobra.Command {
	c := &cobra.Command{
		Use:   "periodic <queue> | periodic pause|resume|remove <queue> <name>",
		Short: "List a queue's periodic schedules; pause, resume or remove one",
		Long: `List the periodic schedules of a queue, by name: each one's spec (a cron spec in its zone,
or a fixed period), the task kind its ticks enqueue, what a scheduler fires after missed ticks
(latest, skip, or catch_up with its bound), whether it is paused, its last tick (fired or
skipped; the declaration when none was) and the next tick due.

emq periodic pause stops a schedule from firing; emq periodic resume lets it fire again from
the next tick (the ticks that fell while it was paused never fire). Neither is an error when
the schedule is paused, or running, already. emq periodic remove deletes a schedule (the jobs
it enqueued stay); it asks for confirmation on a terminal and refuses without one unless
--yes. A schedule that does not exist is exit 3. Processes that declare their schedules at
start (Bus.DeclarePeriodic) declare a removed one again. (The first word decides: a queue
named pause, resume or remove is listed with emq periodic -- <queue>.)`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			queue := args[0]
			ctx, cancel, err := a.openQueue(queue)
			if err != nil {
				return err
			}
			defer cancel()
			infos, err := a.bus.ListPeriodic(ctx, queue)
			if err != nil {
				return err
			}
			l := periodicListing{Queue: queue, Schedules: []periodicRow{}}
			for _, p := range infos {
				l.Schedules = append(l.Schedules, newPeriodicRow(p))
			}
			return a.emit(l, func() { a.printPeriodic(l) })
		},
	}
	remove := periodicVerbCmd(a, "remove", "removed", "Delete a periodic schedule (the jobs it enqueued stay)", true,
		func(b *bus.Bus, ctx context.Context, queue, name string) error {
			found, err := b.RemovePeriodic(ctx, queue, name)
			if err == nil && !found {
				err = notFoundf("queue %s has no periodic schedule %s: see emq periodic %s", queue, name, queue)
			}
			return err
		})
	c.AddCommand(periodicVerbCmd(a, "pause", "paused", "Stop a periodic schedule from firing", false, (*bus.Bus).PausePeriodic),
		periodicVerbCmd(a, "resume", "resumed", "Let a paused periodic schedule fire again", false, (*bus.Bus).ResumePeriodic),
		remove)
	return c
}

// printPeriodic renders emq periodic: one schedule a row.
func (a *app) printPeriodic(l periodicListing) {
	if len(l.Schedules) == 0 {
		fmt.Fprintf(a.out, "%s: no periodic schedules\n", l.Queue)
		return
	}
	t := [][]string{{"NAME", "SCHEDULE", "KIND", "MISSED", "PAUSED", "LAST", "NEXT"}}
	for _, r := range l.Schedules {
		missed := r.Missed
		if r.CatchUp > 0 {
			missed += " " + itoa(r.CatchUp)
		}
		kind := r.Kind
		if kind == "" {
			kind = "-"
		}
		t = append(t, []string{r.Name, r.spec(), kind, missed, yesNo(r.Paused), fmtTime(r.Last), fmtTime(derefTime(r.Next))})
	}
	a.table(t)
}

// periodicVerb is PausePeriodic, ResumePeriodic, or a removal.
type periodicVerb func(b *bus.Bus, ctx context.Context, queue, name string) error

// periodicVerbCmd is emq periodic <use>; with confirm it asks first (or takes --yes).
func periodicVerbCmd(a *app, use, action, short string, confirm bool, verb periodicVerb) *cobra.Command {
	c := &cobra.Command{
		Use:   use + " <queue> <name>",
		Short: short,
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			queue, name := args[0], args[1]
			if err := keys.ValidateName(name); err != nil {
				return usagef("schedule: %v", err)
			}
			ctx, cancel, err := a.openQueue(queue)
			if err != nil {
				return err
			}
			defer func() { cancel() }()
			if confirm {
				if ctx, cancel, err = a.confirmed(fmt.Sprintf("%s the periodic schedule %s of queue %s", use, name, queue), cancel); err != nil {
					return err
				}
			}
			if err := verb(a.bus, ctx, queue, name); err != nil {
				return err
			}
			return a.printChanged(changed{Queue: queue, Schedule: name, Action: action})
		},
	}
	if confirm {
		c.Flags().BoolVar(&a.yes, "yes", false, "do not ask for confirmation")
	}
	return c
}
