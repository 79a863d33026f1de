package dash

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/keys"
)

// The queue page's Lanes tab: the queue's flow control, then a page of one of its lane
// indexes (ready, held, active, limits) with each lane's limits in force and counts, paged by
// the ListLanes cursor; and the lane actions, pause and resume.

// laneIndexes are the indexes the Lanes tab lists (?lset=), in the order of its sub-tabs.
var laneIndexes = []struct {
	Name, Label string
	Set         keys.Type
}{
	{"ready", "Ready", keys.LaneReady},
	{"held", "Held back", keys.LaneWait},
	{"active", "With claimed jobs", keys.LaneActive},
	{"limits", "With limits", keys.Lanes},
}

// lanesView is the Lanes tab of a queue page.
type lanesView struct {
	Index   string   // the ?lset= value
	Indexes []setTab // the sub-tabs (Count unused)
	Flow    bus.FlowInfo
	// QueueStream is true when the page of ready lists the queue's own stream of jobs without
	// a lane, which competes with the lanes (the member "" of laneready).
	QueueStream bool
	Lanes       []bus.LaneInfo
	Cursor      string
	NextQuery   string
	FirstQuery  string
	Err         string
}

// hasLanes reports whether queue has lane state: counts say jobs wait in lanes or at a
// priority, or lanes are ready, held or active; else whether a lane has limits of its own
// (one HSCAN, read only when the counts show none).
func (d *Dashboard) hasLanes(ctx context.Context, queue string, c bus.Counts) bool {
	if c.InLanes != 0 || c.Urgent != 0 || c.LanesReady != 0 || c.LanesHeld != 0 || c.LanesActive != 0 {
		return true
	}
	p, err := d.cfg.Bus.ListLanes(ctx, queue, &bus.LanesOpts{Set: keys.Lanes, Limit: 1})
	return err == nil && (len(p.Lanes) > 0 || p.Next != "")
}

// lanesTab reads the Lanes tab: the index ?lset= (default ready) from ?cursor=, a page of
// DefaultPageSize lanes, their details in one atomic read.
func (d *Dashboard) lanesTab(ctx context.Context, queue string, q url.Values) lanesView {
	v := lanesView{Index: q.Get("lset"), Cursor: q.Get("cursor")}
	if v.Index == "" {
		v.Index = "ready"
	}
	set := keys.Type(0)
	for _, ix := range laneIndexes {
		v.Indexes = append(v.Indexes, setTab{Name: ix.Name, Label: ix.Label, On: ix.Name == v.Index})
		if ix.Name == v.Index {
			set = ix.Set
		}
	}
	query := func(cursor string) string {
		u := url.Values{"set": {"lanes"}, "lset": {v.Index}}
		if cursor != "" {
			u.Set("cursor", cursor)
		}
		return "?" + u.Encode()
	}
	v.FirstQuery = query("")
	if set == 0 {
		v.Err = "lset: " + strconv.Quote(v.Index) + " is not ready, held, active or limits"
		return v
	}
	page, err := d.cfg.Bus.ListLanes(ctx, queue, &bus.LanesOpts{Set: set, Cursor: v.Cursor, Limit: DefaultPageSize})
	if err != nil {
		v.Err = err.Error()
		return v
	}
	names := make([]string, 0, len(page.Lanes))
	for _, n := range page.Lanes {
		if n == "" {
			v.QueueStream = true
			continue
		}
		names = append(names, n)
	}
	if v.Flow, v.Lanes, err = d.cfg.Bus.Lanes(ctx, queue, names...); err != nil {
		v.Err = err.Error()
		return v
	}
	if page.Next != "" {
		v.NextQuery = query(page.Next)
	}
	return v
}

// laneRate is a rate as bus.Rate writes it, or "—" when there is none.
func laneRate(r bus.Rate) string {
	if r.IsZero() {
		return "—"
	}
	return r.String()
}

func (d *Dashboard) pauseLane(ctx context.Context, r *http.Request, queue string) (string, error) {
	lane := r.PostFormValue("lane")
	return "paused lane " + lane + " of " + queue, d.cfg.Bus.PauseLane(ctx, queue, lane)
}

func (d *Dashboard) resumeLane(ctx context.Context, r *http.Request, queue string) (string, error) {
	lane := r.PostFormValue("lane")
	return "resumed lane " + lane + " of " + queue, d.cfg.Bus.ResumeLane(ctx, queue, lane)
}
