package bus

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Limits of a [Periodic] declaration.
const (
	// MinPeriodicEvery is the shortest Periodic.Every: a shorter period would make every
	// scheduler pass a busy loop.
	MinPeriodicEvery = 100 * time.Millisecond
	// DefaultCatchUp is how many missed ticks [MissedCatchUp] fires at most when
	// Periodic.CatchUp is 0.
	DefaultCatchUp = 10
	// MaxCatchUp is the largest Periodic.CatchUp: one pass fires at most this many ticks of
	// one schedule.
	MaxCatchUp = 1000
)

// maxDueScan bounds how many cron ticks one pass enumerates forward from a schedule's last
// tick; past it, the newest ticks are looked for in windows that end at the server's time.
const maxDueScan = 100_000

// cronParser reads the standard five fields (minute, hour, day of month, month, day of week),
// an optional leading seconds field, and the descriptors (@yearly, @monthly, @weekly, @daily,
// @midnight, @hourly).
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// periodicSpec is the spec field of a schedule row: the declaration as JSON, written by Go and
// opaque to the scripts. Every scheduler reads its policy from here, not from its own
// process's declaration, so all of them fire a schedule alike.
type periodicSpec struct {
	Cron    string `json:"cron,omitempty"`
	Zone    string `json:"zone,omitempty"`
	EveryMs int64  `json:"every_ms,omitempty"`
	Kind    string `json:"kind,omitempty"` // set when the payload is a task envelope of Kind
	Missed  string `json:"missed"`
	CatchUp int    `json:"catch_up,omitempty"`
}

// ticks is a compiled spec: when a schedule's ticks fall and how missed ones fire.
type ticks struct {
	every   int64         // period in ms, ticks at its multiples since the Unix epoch; 0 for cron
	cron    cron.Schedule // when every is 0
	loc     *time.Location
	missed  MissedPolicy
	catchUp int
}

// compile checks a spec and builds its ticks. Its errors name the Periodic field.
func (s periodicSpec) compile() (*ticks, error) {
	t := &ticks{every: s.EveryMs, catchUp: s.CatchUp}
	var ok bool
	if t.missed, ok = missedByName[s.Missed]; !ok {
		return nil, fmt.Errorf("Missed: unknown policy %q", s.Missed)
	}
	switch {
	case t.missed == MissedCatchUp && (s.CatchUp < 0 || s.CatchUp > MaxCatchUp):
		return nil, fmt.Errorf("CatchUp: %d is outside 0 to %d", s.CatchUp, MaxCatchUp)
	case t.missed == MissedCatchUp && s.CatchUp == 0:
		t.catchUp = DefaultCatchUp
	case t.missed != MissedCatchUp && s.CatchUp != 0:
		return nil, fmt.Errorf("CatchUp: %d is set but applies to MissedCatchUp only", s.CatchUp)
	}
	switch {
	case s.Cron == "" && s.EveryMs == 0:
		return nil, errors.New("Cron, Every: neither is set; a schedule has exactly one")
	case s.Cron != "" && s.EveryMs != 0:
		return nil, errors.New("Cron, Every: both are set; a schedule has exactly one")
	case s.EveryMs != 0:
		if s.EveryMs < MinPeriodicEvery.Milliseconds() {
			return nil, fmt.Errorf("Every: %v is shorter than the minimum %v", time.Duration(s.EveryMs)*time.Millisecond, MinPeriodicEvery)
		}
		if s.Zone != "" {
			return nil, errors.New("Zone: applies to Cron only; Every ticks at multiples of the period since the Unix epoch")
		}
		return t, nil
	}
	if strings.Contains(s.Cron, "TZ=") {
		return nil, fmt.Errorf("Cron: %q names a time zone; set Periodic.Zone instead", s.Cron)
	}
	if strings.HasPrefix(strings.TrimSpace(s.Cron), "@every") {
		return nil, fmt.Errorf("Cron: %q: @every is not a cron schedule; set Periodic.Every instead", s.Cron)
	}
	var err error
	if t.cron, err = cronParser.Parse(s.Cron); err != nil {
		return nil, fmt.Errorf("Cron: %q: %v", s.Cron, err)
	}
	t.loc = time.UTC
	if s.Zone != "" {
		if t.loc, err = time.LoadLocation(s.Zone); err != nil {
			return nil, fmt.Errorf("Zone: %q: %v", s.Zone, err)
		}
	}
	return t, nil
}

// parseSpec reads a row's spec field.
func parseSpec(raw string) (periodicSpec, *ticks, error) {
	var s periodicSpec
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return s, nil, fmt.Errorf("spec is not JSON: %v", err)
	}
	t, err := s.compile()
	return s, t, err
}

// next is the first tick strictly after the unix ms after, or -1 when there is none (a cron
// spec that matches no time within five years, such as February 30th).
//
// A cron tick is an instant whose wall clock in loc the spec names. robfig/cron's own Next
// steps through loc by whole hours and loses its place on a day whose clock moves by half an
// hour (Australia/Lord_Howe), so the wall clock is searched in UTC instead, one stretch of
// constant offset at a time: within a stretch, wall time is the instant plus the offset, and
// the first match that falls inside the stretch is the tick. A wall time skipped by a change
// has no instant; one repeated has two, each a tick.
func (t *ticks) next(after int64) int64 {
	if t.every > 0 {
		return (after/t.every + 1) * t.every
	}
	from := time.UnixMilli(after).In(t.loc)
	limit := from.AddDate(5, 0, 0)
	wall := func(at time.Time) (time.Time, int) {
		_, off := at.Zone()
		return at.UTC().Add(time.Duration(off) * time.Second), off
	}
	w, off := wall(from)
	for {
		n := t.cron.Next(w) // the spec's location is time.Local: Next reads w's, UTC
		if n.IsZero() {
			return -1
		}
		at := n.Add(-time.Duration(off) * time.Second)
		_, end := from.ZoneBounds()
		if end.IsZero() || at.Before(end) {
			return at.UnixMilli()
		}
		// The match falls past the stretch: look again from the stretch that begins at end,
		// whose first instant is a candidate too.
		if from = end.In(t.loc); from.After(limit) {
			return -1
		}
		w, off = wall(from)
		w = w.Add(-time.Nanosecond)
	}
}

// due returns the ticks in (last, now], at most keep of them, the newest, oldest first; and n,
// how many are due (maxDueScan+1 stands for "more than maxDueScan").
func (t *ticks) due(last, now int64, keep int) ([]int64, int) {
	if keep < 1 || now <= last {
		return nil, 0
	}
	if t.every > 0 {
		first := (last/t.every + 1) * t.every
		if first > now {
			return nil, 0
		}
		n := (now-first)/t.every + 1
		k := min(n, int64(keep))
		out := make([]int64, k)
		newest := first + (n-1)*t.every
		for i := range out {
			out[i] = newest - (k-1-int64(i))*t.every
		}
		return out, int(min(n, maxDueScan+1))
	}
	if out, n, complete := t.scan(last, now, keep, maxDueScan); complete {
		return out, n
	}
	// More than maxDueScan ticks are due: the newest keep lie in some window that ends at now.
	// Cron ticks are at least a second apart, so a window of keep seconds holds at most keep.
	for w := int64(keep) * 1000; ; w *= 2 {
		from := max(now-w, last)
		out, n, complete := t.scan(from, now, keep, maxDueScan)
		if !complete {
			out, _, _ = t.scan(from, now, keep, -1)
		}
		if n >= keep || from == last {
			return out, maxDueScan + 1
		}
	}
}

// scan enumerates the ticks in (from, to], keeping the newest keep, and gives up after limit
// ticks (no limit when negative): complete is false then.
func (t *ticks) scan(from, to int64, keep, limit int) (newest []int64, n int, complete bool) {
	ring := make([]int64, keep) // ring[n%keep] is the slot of the n-th tick
	for at := t.next(from); at >= 0 && at <= to; at = t.next(at) {
		if n == limit {
			return nil, n, false
		}
		ring[n%keep] = at
		n++
	}
	if n <= keep {
		return ring[:n], n, true
	}
	out := make([]int64, 0, keep)
	out = append(out, ring[n%keep:]...)
	return append(out, ring[:n%keep]...), n, true
}

// plan is what one pass does with a schedule's due ticks under its policy: the ticks to fire,
// oldest first, the tick to skip to (0 for none), and how many due ticks neither fire nor are
// skipped to but are passed over: all of them under a skip, the older ones beyond the ticks
// fired otherwise. Under MissedLatest and MissedSkip a pass that comes later than the tick
// after the one it should have fired loses that tick by design; MissedCatchUp is the policy
// for "every tick matters".
func (t *ticks) plan(last, now int64) (fire []int64, skip, dropped int64) {
	keep := 1
	if t.missed == MissedCatchUp {
		keep = t.catchUp
	}
	due, n := t.due(last, now, keep)
	switch {
	case n == 0:
		return nil, 0, 0
	case t.missed == MissedSkip && n > 1:
		return nil, due[len(due)-1], int64(n)
	}
	return due, 0, int64(n - len(due))
}
