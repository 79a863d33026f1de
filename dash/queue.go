package dash

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/keys"
)

// The queue page: its counts and actions, a tab per set, paged by cursor and by mint-time
// range (the JOB ids carry their mint time: no second index), and its periodic schedules.

// setTab is one tab of the queue page.
type setTab struct {
	Name  string // the ?set= value
	Label string
	Count int64
	On    bool
}

// jobRow is one job of a page of a set.
type jobRow struct {
	ID     keys.JobID
	Minted time.Time
	At     time.Time // lease deadline (active) or run-at (scheduled); zero otherwise
	Token  int64     // attempts as the page read them (active and scheduled)
}

// browseForm is the paging of a set, as the query string carries it.
type browseForm struct {
	Set    string
	After  string
	At     string // the score half of an active or schedule cursor (unix ms)
	Newest bool
	From   string // datetime-local, UTC
	To     string
}

// ByScore tells whether the set is ordered by score (lease deadline, run-at), not mint time:
// no mint-time range then.
func (f browseForm) ByScore() bool { return f.Set == "active" || f.Set == "scheduled" }

// query is the form's query string with cursor (nil: the first page).
func (f browseForm) query(cursor url.Values) string {
	v := url.Values{"set": {f.Set}}
	for k, vs := range cursor {
		v[k] = vs
	}
	if f.Newest {
		v.Set("newest", "1")
	}
	if f.From != "" {
		v.Set("from", f.From)
	}
	if f.To != "" {
		v.Set("to", f.To)
	}
	return v.Encode()
}

// localLayout is the layout of an <input type="datetime-local">, read as UTC.
const localLayout = "2006-01-02T15:04"

func parseLocal(field, s string) (time.Time, string) {
	if s == "" {
		return time.Time{}, ""
	}
	for _, l := range []string{localLayout, localLayout + ":05"} {
		if t, err := time.ParseInLocation(l, s, time.UTC); err == nil {
			return t, ""
		}
	}
	return time.Time{}, field + ": " + strconv.Quote(s) + " is not a time like 2006-01-02T15:04"
}

func (d *Dashboard) queuePage(w http.ResponseWriter, r *http.Request) {
	name, ok := d.knownQueue(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	f := browseForm{Set: q.Get("set"), After: q.Get("after"), At: q.Get("at"), Newest: q.Get("newest") == "1", From: q.Get("from"), To: q.Get("to")}
	if f.Set == "" {
		f.Set = "pending"
	}
	set, ok := setOf(f.Set)
	if !ok && f.Set != "lanes" {
		d.fail(w, r, http.StatusBadRequest, "set: "+strconv.Quote(f.Set)+" is not pending, active, scheduled, dead or lanes")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	defer cancel()
	counts, err := d.cfg.Bus.Counts(ctx, name)
	if err != nil {
		d.fail(w, r, http.StatusBadGateway, err.Error())
		return
	}
	opts := &bus.BrowseOpts{Set: set, Newest: f.Newest, Limit: DefaultPageSize}
	var bad string
	if f.After != "" {
		if opts.After, err = keys.ParseJobID(f.After); err != nil {
			bad = "after: " + err.Error()
		}
	}
	var b1, b2, b3 string
	if f.ByScore() {
		f.From, f.To = "", "" // active and schedule are ordered by score: no mint-time range
		opts.AfterAt, b3 = cursorAt(f.At)
	} else {
		opts.From, b1 = parseLocal("from", f.From)
		opts.To, b2 = parseLocal("to", f.To)
	}
	bad = firstOf(bad, b1, b2, b3)
	var rows []jobRow
	var next url.Values
	var browseErr string
	var lanes *lanesView
	if f.Set == "lanes" {
		lv := d.lanesTab(ctx, name, q)
		lanes, bad = &lv, ""
	} else if bad == "" {
		rows, next, browseErr = d.browse(ctx, name, opts)
	}
	hasLanes := f.Set == "lanes" || d.hasLanes(ctx, name, counts)
	periodic, err := d.cfg.Bus.ListPeriodic(ctx, name)
	var periodicErr string
	if err != nil {
		periodicErr = err.Error()
	}
	tabs := []setTab{
		{"pending", "Pending", counts.Pending, false}, {"active", "Active", counts.Active, false},
		{"scheduled", "Scheduled", counts.Scheduled, false}, {"dead", "Dead", counts.Dead, false},
	}
	if hasLanes {
		tabs = append(tabs, setTab{"lanes", "Lanes", -1, false})
	}
	for i := range tabs {
		tabs[i].On = tabs[i].Name == f.Set
	}
	nextQuery := ""
	if next != nil {
		nextQuery = "?" + f.query(next)
	}
	d.render(w, r, http.StatusOK, "queue", "Queue "+name, struct {
		Name        string
		Counts      bus.Counts
		Tabs        []setTab
		Form        browseForm
		Jobs        []jobRow
		NextQuery   string
		FirstQuery  string
		Bad         string
		BrowseErr   string
		Periodic    []bus.PeriodicInfo
		PeriodicErr string
		Tput        throughputView
		HasLanes    bool
		Lanes       *lanesView // the Lanes tab, when it is the one shown
	}{name, counts, tabs, f, rows, nextQuery, "?" + f.query(nil), bad, browseErr, periodic, periodicErr,
		throughput(d.sampler.series(name)), hasLanes, lanes})
}

// setOf is the set a tab names.
func setOf(s string) (keys.Type, bool) {
	switch s {
	case "pending":
		return keys.Pending, true
	case "active":
		return keys.Active, true
	case "scheduled":
		return keys.Schedule, true
	case "dead":
		return keys.Dead, true
	}
	return 0, false
}

func firstOf(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
