package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
)

// baseline is bench/baseline.json: every row's figures from the run that
// wrote bench/REPORT.md, for `make bench-check` to compare a fresh run with.
type baseline struct {
	Note string        `json:"note"`
	Env  [][2]string   `json:"env,omitempty"`
	Rows []baselineRow `json:"rows"`
}

type baselineRow struct {
	ID       string   `json:"id"`
	Name     string   `json:"name"`
	Better   string   `json:"better"` // lower, higher or neither
	Guard    bool     `json:"guard"`
	Measured *float64 `json:"measured,omitempty"` // median, in Unit
	Compared *float64 `json:"compared,omitempty"`
	Unit     string   `json:"unit"`
	Ratio    *float64 `json:"ratio,omitempty"`
	Spread   *float64 `json:"ratio_spread,omitempty"`
}

func toBaseline(rrs []rowResult, env [][2]string) baseline {
	bl := baseline{
		Note: "Written by make bench; make bench-check compares a fresh run's ratios with these.",
		Env:  env,
	}
	for _, rr := range rrs {
		br := baselineRow{ID: rr.id, Name: rr.name, Better: rr.better.String(), Guard: rr.guard, Unit: rr.subject.unit()}
		if rr.subj.ok {
			br.Measured = ptr(rr.subj.sum.median)
		}
		if rr.other != nil && rr.oth.ok {
			br.Compared = ptr(rr.oth.sum.median)
		}
		if rr.ratio != nil {
			br.Ratio, br.Spread = ptr(rr.ratio.median), ptr(rr.ratio.spread)
		}
		bl.Rows = append(bl.Rows, br)
	}
	return bl
}

func writeBaseline(w io.Writer, bl baseline) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(bl)
}

func readBaseline(r io.Reader) (baseline, error) {
	var bl baseline
	if err := json.NewDecoder(r).Decode(&bl); err != nil {
		return baseline{}, fmt.Errorf("reading baseline: %w", err)
	}
	return bl, nil
}

type verdictKind string

const (
	verdictOK        verdictKind = "ok"
	verdictRegressed verdictKind = "REGRESSED"
	verdictMissing   verdictKind = "MISSING" // in the baseline, not in the fresh run
	verdictNew       verdictKind = "new"     // in the fresh run, not in the baseline
)

// verdict is the comparison of one guarded row.
type verdict struct {
	id, name string
	kind     verdictKind
	old, new float64 // ratios; 0 when absent
	// worse is how much worse the fresh ratio is, as a factor: 1.25 means
	// 25% worse whichever direction is better; below 1 means better.
	worse float64
	// allowed is how much worse it may be (0.2 = 20%): the tolerance, or
	// the two runs' spreads added when they are wider.
	allowed float64
}

// check compares the fresh rows with the baseline. Only guarded rows are
// compared (every row with a direction with all set). A ratio fails when it
// is worse by more than tolerance (0.2 = 20%) and by more than the noise the
// two runs measured (the baseline's ratio spread plus the fresh one's): an
// interleaved ratio, whose spread is a few percent, is held to the
// tolerance, while a ratio of two separate benchmarks on a busy machine is
// held only to what its own spread can tell apart, so that the guard never
// fails on noise it has itself reported. A guarded ratio that the baseline
// has and the fresh run lacks fails too, since a benchmark that stops
// running guards nothing. failed reports whether any row failed.
func check(bl baseline, fresh []rowResult, tolerance float64, all bool) (vs []verdict, failed bool) {
	old := map[string]baselineRow{}
	for _, br := range bl.Rows {
		old[br.ID] = br
	}
	for _, rr := range fresh {
		if !rr.guard && !all {
			continue
		}
		if rr.better == neither {
			continue // a factor to read; no direction to regress in
		}
		br, inOld := old[rr.id]
		hadRatio := inOld && br.Ratio != nil
		switch {
		case !hadRatio && rr.ratio == nil:
			continue
		case !hadRatio:
			vs = append(vs, verdict{id: rr.id, name: rr.name, kind: verdictNew, new: rr.ratio.median})
		case rr.ratio == nil:
			vs = append(vs, verdict{id: rr.id, name: rr.name, kind: verdictMissing, old: *br.Ratio})
			failed = true
		default:
			v := verdict{id: rr.id, name: rr.name, old: *br.Ratio, new: rr.ratio.median}
			v.worse = worseBy(v.old, v.new, rr.better)
			v.allowed = tolerance
			if br.Spread != nil {
				v.allowed = math.Max(tolerance, *br.Spread+rr.ratio.spread)
			}
			v.kind = verdictOK
			if v.worse > 1+v.allowed {
				v.kind = verdictRegressed
				failed = true
			}
			vs = append(vs, v)
		}
	}
	sort.SliceStable(vs, func(i, j int) bool { return vs[i].worse > vs[j].worse })
	return vs, failed
}

// worseBy is the factor by which new is worse than old: new/old when lower
// is better, old/new when higher is better.
func worseBy(old, new float64, d direction) float64 {
	if old <= 0 || new <= 0 {
		return math.Inf(1)
	}
	if d == higher {
		return old / new
	}
	return new / old
}

// writeVerdicts prints the check as a markdown table.
func writeVerdicts(w io.Writer, vs []verdict, tolerance float64) {
	fmt.Fprintf(w, "bench-check: ratios vs bench/baseline.json, tolerance %s (or the two runs' spreads added, when wider)\n\n", pct(tolerance))
	if len(vs) == 0 {
		fmt.Fprintln(w, "No guarded ratio is measured in the baseline or in this run: nothing to compare.")
		return
	}
	fmt.Fprintln(w, "| Row | Baseline ratio | Fresh ratio | Change | Allowed | Verdict |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, v := range vs {
		oldS, newS, change, allowed := "—", "—", "—", "—"
		if v.old != 0 {
			oldS = sig3(v.old) + "×"
		}
		if v.new != 0 {
			newS = sig3(v.new) + "×"
		}
		if v.kind == verdictOK || v.kind == verdictRegressed {
			if v.worse >= 1 {
				change = pct(v.worse-1) + " worse"
			} else {
				change = pct(1-v.worse) + " better"
			}
			allowed = pct(v.allowed) + " worse"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", cell(v.name), oldS, newS, change, allowed, v.kind)
	}
}
