package bus

import (
	"context"
	"fmt"
	"time"

	"github.com/echocache/echocache/keys"
)

// BrowseOpts are the options of [Bus.Browse]; nil means defaults.
type BrowseOpts struct {
	// Set is the set to browse: keys.Pending (the default) or keys.Dead. Both are score-0
	// sets, so their lex order is mint order.
	Set keys.Type
	// Newest browses newest-first; the default is oldest-first (claim order for pending).
	Newest bool
	// After is the cursor: the Next of the previous page. The zero JobID starts at the head.
	After keys.JobID
	// From and To bound the mint time: ids minted at or after From and before To. Zero
	// values leave that side open. The ids carry their mint time, so no second index is read.
	From, To time.Time
	// Limit bounds the page. Default 100 ([DefaultLimit]).
	Limit int
}

// Page is one page of [Bus.Browse].
type Page struct {
	IDs []keys.JobID
	// Next is the cursor of the next page (pass it as BrowseOpts.After); the zero JobID when
	// this page is the last.
	Next keys.JobID
}

// Browse lists job ids of queue's pending or dead set, oldest-first or newest-first, a page
// at a time, optionally within a mint-time range. It reads without a script: a page is a
// consistent slice of the set at one moment, and pages are stable under concurrent claims
// because the cursor is an id, not an offset.
func (b *Bus) Browse(ctx context.Context, queue string, opts *BrowseOpts) (Page, error) {
	const op = "browse"
	var o BrowseOpts
	if opts != nil {
		o = *opts
	}
	q, err := b.queue(op, queue)
	if err != nil {
		return Page{}, err
	}
	var key string
	switch o.Set {
	case 0, keys.Pending:
		key = q.Pending()
	case keys.Dead:
		key = q.Dead()
	default:
		return Page{}, fmt.Errorf("%w: %s in queue %s: set %s; browse reads pending or dead", ErrInvalid, op, queue, o.Set)
	}
	limit, err := limitOf(op, queue, true, func() int { return o.Limit })
	if err != nil {
		return Page{}, err
	}
	// Lex bounds: lo and hi in ZRANGEBYLEX syntax, from the time range, narrowed by the cursor.
	lo, hi := "-", "+"
	if !o.From.IsZero() {
		lo = "[" + keys.JobIDFloor(o.From)
	}
	if !o.To.IsZero() {
		hi = "(" + keys.JobIDFloor(o.To)
	}
	if !o.After.IsZero() {
		if o.Newest {
			if c := "(" + o.After.String(); hi == "+" || c[1:] < hi[1:] {
				hi = c
			}
		} else if c := "(" + o.After.String(); lo == "-" || c[1:] >= lo[1:] {
			lo = c
		}
	}
	var cmd = b.client.B().Zrangebylex().Key(key).Min(lo).Max(hi).Limit(0, int64(limit)+1).Build()
	if o.Newest {
		cmd = b.client.B().Zrevrangebylex().Key(key).Max(hi).Min(lo).Limit(0, int64(limit)+1).Build()
	}
	ss, err := b.client.Do(ctx, cmd).AsStrSlice()
	if err != nil {
		return Page{}, errorFor(call{op: op, queue: queue}, translate(err))
	}
	var p Page
	for i, s := range ss {
		if i == limit {
			p.Next = p.IDs[limit-1]
			break
		}
		id, err := keys.ParseJobID(s)
		if err != nil {
			return Page{}, protocolError(op, "%s holds %q, not a JOB id", key, s)
		}
		p.IDs = append(p.IDs, id)
	}
	return p, nil
}
