package dash

import (
	"context"
	"net/url"
	"strconv"
	"time"

	"github.com/echocache/echocache/bus"
)

// browse reads one page of a queue's set: the rows, the cursor of the next page (nil at the
// end) and the error, if any, as text. Active and schedule are ordered by score, so their
// cursor is the last entry's id and score (after and at).
func (d *Dashboard) browse(ctx context.Context, queue string, opts *bus.BrowseOpts) ([]jobRow, url.Values, string) {
	p, err := d.cfg.Bus.Browse(ctx, queue, opts)
	if err != nil {
		return nil, nil, err.Error()
	}
	rows := make([]jobRow, len(p.Entries))
	for i, e := range p.Entries {
		rows[i] = jobRow{ID: e.ID, Minted: e.ID.Time(), At: e.At, Token: e.Token}
	}
	if p.Next.IsZero() {
		return rows, nil, ""
	}
	next := url.Values{"after": {p.Next.String()}}
	if !p.NextAt.IsZero() {
		next.Set("at", strconv.FormatInt(p.NextAt.UnixMilli(), 10))
	}
	return rows, next, ""
}

// cursorAt parses the at of an active or schedule cursor: unix ms.
func cursorAt(s string) (time.Time, string) {
	if s == "" {
		return time.Time{}, ""
	}
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil || ms <= 0 {
		return time.Time{}, "at: " + strconv.Quote(s) + " is not a time in unix ms"
	}
	return time.UnixMilli(ms), ""
}
