package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/keys"
)

// tableRow is one table as emq tables prints it: the sums of its live caches' stats.
type tableRow struct {
	Name      string    `json:"name"`
	FirstSeen time.Time `json:"first_seen"`
	Caches    int       `json:"caches"`
	Degraded  int       `json:"degraded"`
	L1Hits    int64     `json:"l1_hits"`
	L2Hits    int64     `json:"l2_hits"`
	Misses    int64     `json:"misses"`
}

// tableStats is one table as emq table prints it.
type tableStats struct {
	Table    string `json:"table"`
	Caches   int    `json:"caches"`
	Degraded int    `json:"degraded"`
	Partial  bool   `json:"partial"`
	// Reads and the share each tier answered.
	Reads      int64   `json:"reads"`
	L1Hits     int64   `json:"l1_hits"`
	L2Hits     int64   `json:"l2_hits"`
	Misses     int64   `json:"misses"`
	L1HitRatio float64 `json:"l1_hit_ratio"`
	HitRatio   float64 `json:"hit_ratio"`
	Loads      int64   `json:"loads"`
	LoadErrors int64   `json:"load_errors"`
	// Coherence.
	InvalidationsSent     int64 `json:"invalidations_sent"`
	InvalidationsReceived int64 `json:"invalidations_received"`
	Gaps                  int64 `json:"gaps"`
	Regressions           int64 `json:"regressions"`
	Flushes               int64 `json:"flushes"`
	PendingInvalidations  int   `json:"pending_invalidations"`
	// Propagation: from a write's script to a subscriber's receipt of its invalidation.
	PropagationCount  int64   `json:"propagation_count"`
	PropagationMeanMS float64 `json:"propagation_mean_ms"`
	PropagationMaxMS  float64 `json:"propagation_max_ms"`
	// PerCache are the live caches' reports.
	PerCache []cacheRow `json:"per_cache"`
}

// cacheRow is one cache's report of a table.
type cacheRow struct {
	ID       string    `json:"id"`
	At       time.Time `json:"at"`
	Degraded bool      `json:"degraded"`
	L1Hits   int64     `json:"l1_hits"`
	L2Hits   int64     `json:"l2_hits"`
	Misses   int64     `json:"misses"`
}

func tablesCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "tables",
		Short: "List the cache tables of the registry",
		Long: `List every table of the registry (ecc:tables), sorted by name, with how many live caches
publish its stats, how many of them are degraded, and the sums of their L1 hits, L2 hits and
misses.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.connect(); err != nil {
				return err
			}
			ctx, cancel := a.ctx()
			defer cancel()
			ts, err := cache.Tables(ctx, a.client)
			if err != nil {
				return err
			}
			rows := make([]tableRow, 0, len(ts))
			for _, t := range ts {
				fs, err := cache.ReadStats(ctx, a.client, t.Name)
				if err != nil {
					return err
				}
				rows = append(rows, tableRow{Name: t.Name, FirstSeen: t.FirstSeen, Caches: len(fs.Caches), Degraded: fs.Degraded,
					L1Hits: fs.Total.L1Hits, L2Hits: fs.Total.L2Hits, Misses: fs.Total.Misses})
			}
			return a.emit(rows, func() {
				t := [][]string{{"TABLE", "CACHES", "DEGRADED", "L1 HITS", "L2 HITS", "MISSES", "FIRST SEEN"}}
				for _, r := range rows {
					t = append(t, []string{r.Name, itoa(r.Caches), itoa(r.Degraded), itoa(r.L1Hits), itoa(r.L2Hits),
						itoa(r.Misses), fmtTime(r.FirstSeen)})
				}
				a.table(t)
			})
		},
	}
}

func tableCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "table <name>",
		Short: "One table's hit ratios, coherence and propagation across its caches",
		Long: `Print one table's stats summed over the live caches that declared it: reads and the share
answered by L1 and by either tier, loads and load errors, invalidations sent and received,
gaps, regressions, flushes, invalidations owed (-1: a whole-table one), the propagation
delay from a write to its invalidation's receipt (count, mean, max), and each cache's row.
Exit 3 when the table is not in the registry.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := a.connect(); err != nil {
				return err
			}
			ctx, cancel := a.ctx()
			defer cancel()
			if err := a.requireTable(ctx, args[0]); err != nil {
				return err
			}
			fs, err := cache.ReadStats(ctx, a.client, args[0])
			if err != nil {
				return err
			}
			s := describeTable(fs)
			return a.emit(s, func() { a.printTable(s) })
		},
	}
}

// requireTable refuses a table name that is malformed (exit 2) or not in the registry
// (exit 3).
func (a *app) requireTable(ctx context.Context, name string) error {
	if err := keys.ValidateName(name); err != nil {
		return usagef("table: %v", err)
	}
	ts, err := cache.Tables(ctx, a.client)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(ts, func(t cache.TableInfo) bool { return t.Name == name }) {
		return notFoundf("table %s is not in the registry (%s): see emq tables", name, keys.TableRegistry())
	}
	return nil
}

func describeTable(fs cache.FleetStats) tableStats {
	t := fs.Total
	reads := t.L1Hits + t.L2Hits + t.Misses
	s := tableStats{
		Table: fs.Table, Caches: len(fs.Caches), Degraded: fs.Degraded, Partial: fs.Partial,
		Reads: reads, L1Hits: t.L1Hits, L2Hits: t.L2Hits, Misses: t.Misses,
		Loads: t.Loads, LoadErrors: t.LoadErrors,
		InvalidationsSent: t.InvalidationsSent, InvalidationsReceived: t.InvalidationsReceived,
		Gaps: t.Gaps, Regressions: t.Regressions, Flushes: t.Flushes, PendingInvalidations: t.PendingInvalidations,
		PropagationCount: t.PropagationCount, PropagationMaxMS: ms(t.PropagationMax),
		PerCache: []cacheRow{},
	}
	if reads > 0 {
		s.L1HitRatio = float64(t.L1Hits) / float64(reads)
		s.HitRatio = float64(t.L1Hits+t.L2Hits) / float64(reads)
	}
	if t.PropagationCount > 0 {
		s.PropagationMeanMS = ms(t.PropagationTotal) / float64(t.PropagationCount)
	}
	for _, c := range fs.Caches {
		s.PerCache = append(s.PerCache, cacheRow{ID: c.ID, At: c.At, Degraded: c.Stats.Degraded,
			L1Hits: c.Stats.L1Hits, L2Hits: c.Stats.L2Hits, Misses: c.Stats.Misses})
	}
	return s
}

func (a *app) printTable(s tableStats) {
	rows := [][]string{
		{"table:", s.Table},
		{"caches:", fmt.Sprintf("%d live, %d degraded", s.Caches, s.Degraded)},
		{"reads:", fmt.Sprintf("%d (L1 %d, L2 %d, misses %d)", s.Reads, s.L1Hits, s.L2Hits, s.Misses)},
		{"hit ratio:", fmt.Sprintf("L1 %s, L1+L2 %s", fmtRatio(s.L1Hits, s.Reads), fmtRatio(s.L1Hits+s.L2Hits, s.Reads))},
		{"loads:", fmt.Sprintf("%d (%d failed)", s.Loads, s.LoadErrors)},
		{"invalidations:", fmt.Sprintf("%d sent, %d received, %d owed", s.InvalidationsSent, s.InvalidationsReceived, s.PendingInvalidations)},
		{"coherence:", fmt.Sprintf("%d gaps, %d regressions, %d flushes", s.Gaps, s.Regressions, s.Flushes)},
		{"propagation:", fmt.Sprintf("%d received, mean %.3f ms, max %.3f ms", s.PropagationCount, s.PropagationMeanMS, s.PropagationMaxMS)},
	}
	a.table(rows)
	if len(s.PerCache) == 0 {
		return
	}
	fmt.Fprintln(a.out)
	t := [][]string{{"CACHE", "REPORTED", "DEGRADED", "L1 HITS", "L2 HITS", "MISSES"}}
	for _, c := range s.PerCache {
		t = append(t, []string{c.ID, fmtTime(c.At), yesNo(c.Degraded), itoa(c.L1Hits), itoa(c.L2Hits), itoa(c.Misses)})
	}
	a.table(t)
}
