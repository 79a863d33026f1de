package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/keys"
)

// The lanes of a queue: emq lanes lists an index of them, emq lane reads one, emq lane pause
// and emq lane resume stop and restart one.

// laneSets are the indexes emq lanes lists (--set), and the grammar's types they name.
var laneSets = map[string]keys.Type{"ready": keys.LaneReady, "held": keys.LaneWait, "active": keys.LaneActive, "limits": keys.Lanes}

// laneSetOrder is the order laneSets are named in messages.
var laneSetOrder = []string{"ready", "held", "active", "limits"}

// lanesListing is one page of emq lanes.
type lanesListing struct {
	Queue string  `json:"queue"`
	Set   string  `json:"set"`
	Flow  flowRow `json:"flow"`
	// QueueStream is true when the page of ready lists the queue's own stream of jobs
	// without a lane (the member "" of laneready), which competes with the lanes.
	QueueStream bool      `json:"queue_stream,omitempty"`
	Lanes       []laneRow `json:"lanes"`
	// Next is the cursor of the next page (--cursor), empty on the last page.
	Next string `json:"next,omitempty"`
}

// flowRow is a queue's flow control: its own rate, the default limits of its lanes, and when
// its jobs without a lane may be claimed again after a handler's RateLimited.
type flowRow struct {
	Rate         *rateRow   `json:"rate,omitempty"`
	LaneDefaults limitsRow  `json:"lane_defaults"`
	HeldUntil    *time.Time `json:"held_until,omitempty"`
	// Now is the server's clock at the read.
	Now time.Time `json:"now"`
}

// limitsRow are limits; an absent field is unset.
type limitsRow struct {
	Cap    int      `json:"cap,omitempty"`
	Rate   *rateRow `json:"rate,omitempty"`
	Weight int      `json:"weight,omitempty"`
}

// rateRow is a rate: Limit claims per PerMS milliseconds, Burst at once. In a lane's own
// limits and the queue's, 0 for PerMS or Burst is the default (1 s, 1); the limits in force
// have them filled in.
type rateRow struct {
	Limit int     `json:"limit"`
	PerMS float64 `json:"per_ms"`
	Burst int     `json:"burst"`
}

// laneRow is one lane: the limits in force (its own, else the queue's defaults, field by
// field) and its own, paused, its waiting and claimed jobs, whether it is in the round robin,
// and until when it is held back.
type laneRow struct {
	Name      string     `json:"name"`
	Limits    limitsRow  `json:"limits"`
	Own       limitsRow  `json:"own"`
	Paused    bool       `json:"paused"`
	Waiting   int64      `json:"waiting"`
	Active    int64      `json:"active"`
	Ready     bool       `json:"ready"`
	HeldUntil *time.Time `json:"held_until,omitempty"`
}

func newRate(r bus.Rate) *rateRow {
	if r.IsZero() {
		return nil
	}
	return &rateRow{Limit: r.Limit, PerMS: ms(r.Per), Burst: r.Burst}
}

func newLimits(l bus.LaneLimits) limitsRow {
	return limitsRow{Cap: l.Cap, Rate: newRate(l.Rate), Weight: l.Weight}
}

// timePtr is t in UTC, or nil for the zero time.
func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

func newFlow(f bus.FlowInfo) flowRow {
	return flowRow{Rate: newRate(f.Rate), LaneDefaults: newLimits(f.Lanes), HeldUntil: timePtr(f.HeldUntil), Now: f.Now.UTC()}
}

func newLane(l bus.LaneInfo) laneRow {
	return laneRow{Name: l.Name, Limits: newLimits(l.Limits), Own: newLimits(l.Own), Paused: l.Paused,
		Waiting: l.Waiting, Active: l.Active, Ready: l.Ready, HeldUntil: timePtr(l.HeldUntil)}
}

// fmtLaneRate is a rate as bus.Rate writes it ("200/1s burst 20"), or "-" when there is none.
func fmtLaneRate(r *rateRow) string {
	if r == nil {
		return "-"
	}
	return r.rate().String()
}

// rate is the bus.Rate the row was made from.
func (r rateRow) rate() bus.Rate {
	return bus.Rate{Limit: r.Limit, Per: time.Duration(r.PerMS * float64(time.Millisecond)), Burst: r.Burst}
}

// fmtOpt is n, or "-" when it is unset (0).
func fmtOpt(n int) string {
	if n == 0 {
		return "-"
	}
	return itoa(n)
}

// fmtLimits is limits as bus.LaneLimits writes them: "cap 5, rate 200/1s burst 20, weight 2",
// or "none".
func fmtLimits(l limitsRow) string {
	limits := bus.LaneLimits{Cap: l.Cap, Weight: l.Weight}
	if l.Rate != nil {
		limits.Rate = l.Rate.rate()
	}
	return limits.String()
}

// fmtFlow is the header line of a queue's flow control.
func fmtFlow(queue string, f flowRow) string {
	return fmt.Sprintf("queue %s: rate %s; lane defaults: %s; held until %s",
		queue, fmtLaneRate(f.Rate), fmtLimits(f.LaneDefaults), fmtTime(derefTime(f.HeldUntil)))
}

func derefTime(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

// laneTable prints lanes, one a row, after a row "(queue)" for the queue's own stream when
// queueStream is true (its waiting jobs are counted in emq stats, not here).
func (a *app) laneTable(lanes []laneRow, queueStream bool) {
	t := [][]string{{"LANE", "CAP", "RATE", "WEIGHT", "PAUSED", "WAITING", "ACTIVE", "READY", "HELD UNTIL"}}
	if queueStream {
		t = append(t, []string{"(queue)", "-", "-", "-", "-", "-", "-", "yes", "-"})
	}
	for _, l := range lanes {
		t = append(t, []string{l.Name, fmtOpt(l.Limits.Cap), fmtLaneRate(l.Limits.Rate), fmtOpt(l.Limits.Weight),
			yesNo(l.Paused), itoa(l.Waiting), itoa(l.Active), yesNo(l.Ready), fmtTime(derefTime(l.HeldUntil))})
	}
	a.table(t)
}

func lanesCmd(a *app) *cobra.Command {
	var (
		set    string
		cursor string
		limit  int
	)
	c := &cobra.Command{
		Use:   "lanes <queue> [--set ready|held|active|limits]",
		Short: "List the lanes of a queue with their limits and counts, a page at a time",
		Long: `List the lanes of one of a queue's lane indexes, with, for each, the limits in force (its own,
else the queue's defaults for lanes: cap, rate as "200/1s burst 20", weight), whether it is
paused, its waiting jobs (of priority 0), its claimed jobs, whether it is in the round robin,
and until when it is held back. A header line shows the queue's flow control: its own rate,
the default limits of its lanes, and until when its jobs without a lane are held back.

--set chooses the index (default ready):
  ready   the lanes with waiting work, in the order the round robin serves them; the
          queue's own stream of jobs without a lane, when it competes with lanes, is listed
          as "(queue)"
  held    the lanes held back by their rate or a handler's RateLimited, soonest first
  active  the lanes with claimed jobs
  limits  the lanes with limits of their own (a paused lane is one of them)

A page holds at most --limit lanes (default 100); the next page starts at the --cursor the
"more:" line prints. The details of a page are read in one atomic snapshot; the index is
read without one, so a page of an index that changes meanwhile may repeat or miss a lane.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			queue := args[0]
			idx, ok := laneSets[set]
			if !ok {
				return usagef("--set %q: lanes lists %s", set, strings.Join(laneSetOrder, ", "))
			}
			if limit < 1 || limit > 1000 {
				return usagef("--limit: %d is not 1 to 1000", limit)
			}
			ctx, cancel, err := a.openQueue(queue)
			if err != nil {
				return err
			}
			defer cancel()
			page, err := a.bus.ListLanes(ctx, queue, &bus.LanesOpts{Set: idx, Cursor: cursor, Limit: limit})
			if err != nil {
				return err
			}
			l := lanesListing{Queue: queue, Set: set, Lanes: []laneRow{}, Next: page.Next}
			names := make([]string, 0, len(page.Lanes))
			for _, n := range page.Lanes {
				if n == "" {
					l.QueueStream = true
					continue
				}
				names = append(names, n)
			}
			flow, infos, err := a.bus.Lanes(ctx, queue, names...)
			if err != nil {
				return err
			}
			l.Flow = newFlow(flow)
			for _, li := range infos {
				l.Lanes = append(l.Lanes, newLane(li))
			}
			return a.emit(l, func() { a.printLanes(l, limit) })
		},
	}
	f := c.Flags()
	f.StringVar(&set, "set", "ready", "the index to list: "+strings.Join(laneSetOrder, ", "))
	f.StringVar(&cursor, "cursor", "", "the page at this cursor (the previous page's \"more:\" line)")
	f.IntVar(&limit, "limit", bus.DefaultLimit, "lanes per page, at most 1000")
	return c
}

// printLanes renders a page of emq lanes and the command of the next page.
func (a *app) printLanes(l lanesListing, limit int) {
	fmt.Fprintln(a.out, fmtFlow(l.Queue, l.Flow))
	a.laneTable(l.Lanes, l.QueueStream)
	if l.Next == "" {
		return
	}
	more := fmt.Sprintf("more: emq lanes %s --set %s", l.Queue, l.Set)
	if limit != bus.DefaultLimit {
		more += " --limit " + itoa(limit)
	}
	fmt.Fprintln(a.out, more+" --cursor "+l.Next)
}

// oneLane is what emq lane prints: the queue's flow control and the lane.
type oneLane struct {
	Queue string  `json:"queue"`
	Flow  flowRow `json:"flow"`
	Lane  laneRow `json:"lane"`
}

func laneCmd(a *app) *cobra.Command {
	c := &cobra.Command{
		Use:   "lane <queue> <lane> | lane pause|resume <queue> <lane>",
		Short: "One lane of a queue: its limits and counts; pause or resume it",
		Long: `Print one lane of a queue: the queue's flow control, then the lane's limits in force and
its own, whether it is paused, its waiting and claimed jobs, whether it is in the round robin,
and until when it is held back (see emq lanes). A lane that does not exist reads as empty: a
lane exists as soon as a job names it or it is given limits. A lane is named by 1 to 64 bytes
of [A-Za-z0-9_.-] (exit 2 otherwise).

emq lane pause stops the lane from giving work: claims skip it while its jobs wait, and its
claimed jobs run on; emq lane resume lets it give work again. Neither is an error when the
lane is paused, or running, already. (The first word decides: a queue named pause or resume
is read through emq lanes.)`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			queue, lane := args[0], args[1]
			ctx, cancel, err := a.openLane(queue, lane)
			if err != nil {
				return err
			}
			defer cancel()
			flow, infos, err := a.bus.Lanes(ctx, queue, lane)
			if err != nil {
				return err
			}
			o := oneLane{Queue: queue, Flow: newFlow(flow), Lane: newLane(infos[0])}
			return a.emit(o, func() { a.printLane(o) })
		},
	}
	c.AddCommand(laneVerbCmd(a, "pause", "paused", "Stop a lane from giving work", (*bus.Bus).PauseLane),
		laneVerbCmd(a, "resume", "resumed", "Let a paused lane give work again", (*bus.Bus).ResumeLane))
	return c
}

// printLane renders emq lane: the flow header, then the lane's fields one a line.
func (a *app) printLane(o oneLane) {
	l := o.Lane
	fmt.Fprintln(a.out, fmtFlow(o.Queue, o.Flow))
	a.table([][]string{
		{"lane", l.Name},
		{"limits", fmtLimits(l.Limits)},
		{"own limits", fmtLimits(l.Own)},
		{"paused", yesNo(l.Paused)},
		{"waiting", itoa(l.Waiting)},
		{"active", itoa(l.Active)},
		{"ready", yesNo(l.Ready)},
		{"held until", fmtTime(derefTime(l.HeldUntil))},
	})
}

// openLane is openQueue for a command on one lane of the queue, after refusing a malformed
// lane name (exit 2).
func (a *app) openLane(queue, lane string) (context.Context, context.CancelFunc, error) {
	if err := keys.ValidateLane(lane); err != nil {
		return nil, nil, usagef("%v", err)
	}
	return a.openQueue(queue)
}

// laneVerb is PauseLane or ResumeLane.
type laneVerb func(b *bus.Bus, ctx context.Context, queue, lane string) error

func laneVerbCmd(a *app, use, action, short string, verb laneVerb) *cobra.Command {
	return &cobra.Command{
		Use:   use + " <queue> <lane>",
		Short: short,
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			queue, lane := args[0], args[1]
			ctx, cancel, err := a.openLane(queue, lane)
			if err != nil {
				return err
			}
			defer cancel()
			if err := verb(a.bus, ctx, queue, lane); err != nil {
				return err
			}
			return a.printChanged(changed{Queue: queue, Lane: lane, Action: action})
		},
	}
}
