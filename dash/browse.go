package dash

import (
	"context"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/keys"
)

// browse reads one page of a queue's set: the rows, the cursor of the next page ("" at the
// end) and the error, if any, as text.
func (d *Dashboard) browse(ctx context.Context, queue string, opts *bus.BrowseOpts) ([]jobRow, string, string) {
	if opts.Set == keys.Active || opts.Set == keys.Schedule {
		return nil, "", "this version of the bus browses pending and dead only"
	}
	p, err := d.cfg.Bus.Browse(ctx, queue, opts)
	if err != nil {
		return nil, "", err.Error()
	}
	rows := make([]jobRow, len(p.IDs))
	for i, id := range p.IDs {
		rows[i] = jobRow{ID: id, Minted: id.Time()}
	}
	next := ""
	if !p.Next.IsZero() {
		next = p.Next.String()
	}
	return rows, next, ""
}
