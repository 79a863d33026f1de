package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/echocache/echocache/bus"
)

// queueStats are one queue's counts and its live workers' published counters, as emq stats
// and emq watch print them.
type queueStats struct {
	Queue       string `json:"queue"`
	Pending     int64  `json:"pending"`
	Active      int64  `json:"active"`
	Scheduled   int64  `json:"scheduled"`
	Dead        int64  `json:"dead"`
	Paused      bool   `json:"paused"`
	Workers     int    `json:"workers"`
	Concurrency int    `json:"concurrency"`
	Running     int    `json:"running"`
	// The fleet's counters since each live worker started (bus.FleetStats.Total).
	Claimed    int64 `json:"claimed"`
	Completed  int64 `json:"completed"`
	Failed     int64 `json:"failed"`
	Retried    int64 `json:"retried"`
	DeadJobs   int64 `json:"dead_jobs"`
	Snoozed    int64 `json:"snoozed"`
	HandedBack int64 `json:"handed_back"`
	Stale      int64 `json:"stale"`
	LeaseLost  int64 `json:"lease_lost"`
	// Cancelled counts jobs whose heartbeat found them cancelled (emq cancel of a running job).
	Cancelled int64 `json:"cancelled"`
	// The lane counts (bus.Counts): jobs of priority 0 waiting in the lanes' sets, jobs of
	// priority 1 to 3 waiting (both counted in Pending), lanes in the round robin, held back,
	// with claimed jobs.
	InLanes     int64 `json:"in_lanes"`
	Urgent      int64 `json:"urgent"`
	LanesReady  int64 `json:"lanes_ready"`
	LanesHeld   int64 `json:"lanes_held"`
	LanesActive int64 `json:"lanes_active"`
	// Rates are per second between two reads; nil when none were taken.
	Rates *rates `json:"rates,omitempty"`
	fleet bus.FleetStats
}

// rates are a fleet's per-second counters between two reads (bus.FleetStats.Rates).
type rates struct {
	WindowMS  float64 `json:"window_ms"`
	Workers   int     `json:"workers"`
	Claimed   float64 `json:"claimed"`
	Completed float64 `json:"completed"`
	Failed    float64 `json:"failed"`
	Retried   float64 `json:"retried"`
	Dead      float64 `json:"dead"`
	Cancelled float64 `json:"cancelled"`
}

func statsCmd(a *app) *cobra.Command {
	var window time.Duration
	c := &cobra.Command{
		Use:   "stats [queue]",
		Short: "Counts and fleet counters of every queue, or of one",
		Long: `Print, for every queue of the registry or for the one named, the sizes of its sets and the
counters its live workers publish (every WorkerConfig.StatsInterval, default 5 s): workers,
running handlers, claimed, completed, failed, retried, dead, stale, lease lost, cancelled.
When a queue has lane state, the lane counts follow: jobs waiting in lanes, urgent jobs
(priority 1 to 3; both counted in pending), and how many lanes are ready, held back and
active (emq lanes lists them).

With --window D the stats are read twice, D apart, and the per-second rates between the
two reads are printed too: a worker's rate counts once it has published a newer snapshot,
so D should be longer than the workers' StatsInterval. Default 0: no rates.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if window < 0 {
				return usagef("--window: %v is negative", window)
			}
			if err := a.connect(); err != nil {
				return err
			}
			names, err := a.queueNames(args)
			if err != nil {
				return err
			}
			rows, err := a.queueStats(names)
			if err != nil {
				return err
			}
			if window > 0 {
				time.Sleep(window)
				later, err := a.queueStats(names)
				if err != nil {
					return err
				}
				withRates(later, rows)
				rows = later
			}
			return a.emit(rows, func() { a.statsTable(rows) })
		},
	}
	c.Flags().DurationVar(&window, "window", 0, "read twice this far apart and print rates (0: no rates)")
	return c
}

// queueNames is args (one queue, which must be listed) or every queue of the registry.
func (a *app) queueNames(args []string) ([]string, error) {
	ctx, cancel := a.ctx()
	defer cancel()
	if len(args) == 1 {
		if err := a.requireQueue(ctx, args[0]); err != nil {
			return nil, err
		}
		return args, nil
	}
	qs, err := a.bus.Queues(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(qs))
	for i, q := range qs {
		names[i] = q.Name
	}
	return names, nil
}

// queueStats reads the counts and fleet stats of each queue.
func (a *app) queueStats(names []string) ([]queueStats, error) {
	ctx, cancel := a.ctx()
	defer cancel()
	out := make([]queueStats, 0, len(names))
	for _, name := range names {
		s, err := readQueueStats(ctx, a.bus, name)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func readQueueStats(ctx context.Context, b *bus.Bus, name string) (queueStats, error) {
	c, err := b.Counts(ctx, name)
	if err != nil {
		return queueStats{}, err
	}
	fs, err := b.WorkerStats(ctx, name)
	if err != nil {
		return queueStats{}, err
	}
	t := fs.Total
	return queueStats{
		Queue: name, Pending: c.Pending, Active: c.Active, Scheduled: c.Scheduled, Dead: c.Dead, Paused: c.Paused,
		Workers: len(fs.Workers), Concurrency: fs.Concurrency, Running: t.Running,
		Claimed: t.Claimed, Completed: t.Completed, Failed: t.Failed, Retried: t.Retried, DeadJobs: t.Dead,
		Snoozed: t.Snoozed, HandedBack: t.HandedBack, Stale: t.Stale, LeaseLost: t.LeaseLost,
		Cancelled: t.Cancelled, InLanes: c.InLanes, Urgent: c.Urgent, LanesReady: c.LanesReady, LanesHeld: c.LanesHeld,
		LanesActive: c.LanesActive, fleet: fs,
	}, nil
}

// withRates sets each row of now's rates from the same queue's row in prev.
func withRates(now, prev []queueStats) {
	before := make(map[string]bus.FleetStats, len(prev))
	for _, p := range prev {
		before[p.Queue] = p.fleet
	}
	for i := range now {
		p, ok := before[now[i].Queue]
		if !ok {
			continue
		}
		r := now[i].fleet.Rates(p)
		now[i].Rates = &rates{WindowMS: ms(now[i].fleet.At.Sub(p.At)), Workers: r.Workers,
			Claimed: r.Claimed, Completed: r.Completed, Failed: r.Failed, Retried: r.Retried, Dead: r.Dead,
			Cancelled: r.Cancelled}
	}
}

// hasLanes reports whether the counts show lane state: jobs in lanes or urgent, lanes ready,
// held or active.
func (s queueStats) hasLanes() bool {
	return s.InLanes != 0 || s.Urgent != 0 || s.LanesReady != 0 || s.LanesHeld != 0 || s.LanesActive != 0
}

// statsTable prints rows as a table; the rate columns appear when rates were taken, the lane
// columns when a queue has lane state (a queue without it shows "-" there).
func (a *app) statsTable(rows []queueStats) {
	withRates := len(rows) > 0 && rows[0].Rates != nil
	withLanes := slices.ContainsFunc(rows, queueStats.hasLanes)
	head := []string{"QUEUE", "PENDING", "ACTIVE", "SCHEDULED", "DEAD", "PAUSED", "WORKERS", "RUNNING",
		"CLAIMED", "COMPLETED", "FAILED", "RETRIED", "DEAD JOBS", "STALE", "LEASE LOST", "CANCELLED"}
	if withLanes {
		head = append(head, "IN LANES", "URGENT", "LANES READY", "LANES HELD", "LANES ACTIVE")
	}
	if withRates {
		head = append(head, "COMPLETED/S", "FAILED/S")
	}
	t := [][]string{head}
	for _, r := range rows {
		row := []string{r.Queue, itoa(r.Pending), itoa(r.Active), itoa(r.Scheduled), itoa(r.Dead), yesNo(r.Paused),
			fmt.Sprintf("%d (%d slots)", r.Workers, r.Concurrency), itoa(r.Running),
			itoa(r.Claimed), itoa(r.Completed), itoa(r.Failed), itoa(r.Retried), itoa(r.DeadJobs), itoa(r.Stale), itoa(r.LeaseLost),
			itoa(r.Cancelled)}
		if withLanes {
			lanes := []string{"-", "-", "-", "-", "-"}
			if r.hasLanes() {
				lanes = []string{itoa(r.InLanes), itoa(r.Urgent), itoa(r.LanesReady), itoa(r.LanesHeld), itoa(r.LanesActive)}
			}
			row = append(row, lanes...)
		}
		if withRates {
			row = append(row, "-", "-")
			if r.Rates != nil {
				row[len(row)-2], row[len(row)-1] = fmtRate(r.Rates.Completed), fmtRate(r.Rates.Failed)
			}
		}
		t = append(t, row)
	}
	a.table(t)
}
