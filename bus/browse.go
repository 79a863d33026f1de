package bus

import (
	"context"
	"fmt"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
)

// MaxBrowseLimit is the largest page of active or schedule that one [Bus.Browse] reads.
const MaxBrowseLimit = 1000

// BrowseOpts are the options of [Bus.Browse]; nil means defaults.
type BrowseOpts struct {
	// Set is the set to browse: keys.Pending (the default), keys.Dead, keys.Active or
	// keys.Schedule. Pending and dead are score-0 sets listed in mint order (lex order);
	// active is listed by lease deadline and schedule by run-at, ties by id.
	Set keys.Type
	// Newest browses newest-first (the latest mint, deadline or run-at first); the default is
	// oldest-first (claim order for pending, the next lease to run out for active, the next
	// job due for schedule).
	Newest bool
	// After is the cursor: the Next of the previous page. The zero JobID starts at the head.
	After keys.JobID
	// AfterAt is the other half of the cursor of active and schedule, whose order is by
	// score: the NextAt of the previous page. It must be set with After for those sets, and
	// is not used for pending and dead.
	AfterAt time.Time
	// From and To bound the mint time of pending and dead: ids minted at or after From and
	// before To. Zero values leave that side open. The ids carry their mint time, so no second
	// index is read; they carry it to the millisecond, so both bounds are cut to the
	// millisecond first: windows that meet split the ids between them, and a To of time.Now()
	// leaves out the ids of its own millisecond. Active and schedule are ordered by score, not
	// by mint time, and refuse them.
	From, To time.Time
	// Limit bounds the page. Default 100 ([DefaultLimit]); at most [MaxBrowseLimit] for
	// active and schedule, [MaxBatch] for pending, dead and a lane's set.
	Limit int
	// Lane, when set, browses that lane's waiting jobs of priority 0 (keys.LanePending, a
	// score-0 set in mint order, paged as pending is); Set must then be 0 or
	// keys.LanePending. A lane that does not exist reads as empty.
	Lane string
}

// Entry is one job of a [Page].
type Entry struct {
	ID keys.JobID
	// At is the job's score in active (its lease deadline) or schedule (its run-at), server
	// clock; zero in pending and dead.
	At time.Time
	// Token is the row's attempts as the page read it, in active and schedule: for an active
	// job the lease holder's token (see [Job].Token), for a scheduled one the claims so far.
	// 0 in pending and dead (not read), and when the row is missing.
	Token int64
}

// Page is one page of [Bus.Browse].
type Page struct {
	// IDs are the page's job ids, in order.
	IDs []keys.JobID
	// Entries are the same jobs with what the set knows of them (one Entry per id).
	Entries []Entry
	// Next is the cursor of the next page (pass it as BrowseOpts.After); the zero JobID when
	// this page is the last.
	Next keys.JobID
	// NextAt is the rest of the cursor for active and schedule (pass it as
	// BrowseOpts.AfterAt): the At of the page's last entry; zero when this page is the last.
	NextAt time.Time
}

// Browse lists the jobs of one of queue's sets, oldest-first or newest-first, a page at a
// time. Pending and dead are read without a script, optionally within a mint-time range: a
// page is a consistent slice of the set at one moment. Active and schedule are read by the
// browse script in one atomic snapshot, with each job's lease deadline or run-at and the
// row's attempts. Pages are stable under concurrent claims because the cursor names the last
// entry (its id, and its score in active and schedule), not an offset.
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
	limit, err := limitOf(op, queue, true, func() int { return o.Limit })
	if err != nil {
		return Page{}, err
	}
	if o.Lane != "" {
		if o.Set != 0 && o.Set != keys.LanePending {
			return Page{}, fmt.Errorf("%w: %s in queue %s: BrowseOpts.Lane with set %s; a lane's set is keys.LanePending", ErrInvalid, op, queue, o.Set)
		}
		key, err := q.LanePending(o.Lane)
		if err != nil {
			return Page{}, invalid(op+" in queue "+queue, err)
		}
		return b.browseLex(ctx, op, queue, key, o, limit)
	}
	switch o.Set {
	case 0, keys.Pending:
		return b.browseLex(ctx, op, queue, q.Pending(), o, limit)
	case keys.Dead:
		return b.browseLex(ctx, op, queue, q.Dead(), o, limit)
	case keys.Active, keys.Schedule:
		return b.browseScore(ctx, op, q, o, limit)
	}
	return Page{}, fmt.Errorf("%w: %s in queue %s: set %s; browse reads pending, active, schedule or dead", ErrInvalid, op, queue, o.Set)
}

// browseLex reads a page of a score-0 set by lex range: lex order is mint order.
func (b *Bus) browseLex(ctx context.Context, op, queue, key string, o BrowseOpts, limit int) (Page, error) {
	if !o.AfterAt.IsZero() {
		return Page{}, fmt.Errorf("%w: %s in queue %s: AfterAt is the cursor of active and schedule; pending and dead page by After alone", ErrInvalid, op, queue)
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
		p.Entries = append(p.Entries, Entry{ID: id})
	}
	return p, nil
}

// browseScore reads a page of active or schedule with the browse script.
func (b *Bus) browseScore(ctx context.Context, op string, q keys.Queue, o BrowseOpts, limit int) (Page, error) {
	queue := q.Name()
	switch {
	case !o.From.IsZero() || !o.To.IsZero():
		return Page{}, fmt.Errorf("%w: %s in queue %s: From and To bound the mint time of pending and dead; %s is ordered by score", ErrInvalid, op, queue, o.Set)
	case limit > MaxBrowseLimit:
		return Page{}, fmt.Errorf("%w: %s in queue %s: Limit %d; a page of %s holds at most %d jobs", ErrInvalid, op, queue, limit, o.Set, MaxBrowseLimit)
	case o.After.IsZero() != o.AfterAt.IsZero():
		return Page{}, fmt.Errorf("%w: %s in queue %s: the cursor of %s is After and AfterAt together (a page's Next and NextAt)", ErrInvalid, op, queue, o.Set)
	case !o.AfterAt.IsZero() && o.AfterAt.UnixMilli() < 0:
		return Page{}, fmt.Errorf("%w: %s in queue %s: AfterAt %v is before 1970", ErrInvalid, op, queue, o.AfterAt)
	}
	which, newest, after, afterAt := "0", "0", "", "0"
	if o.Set == keys.Schedule {
		which = "1"
	}
	if o.Newest {
		newest = "1"
	}
	if !o.After.IsZero() {
		after, afterAt = o.After.String(), itoa(o.AfterAt.UnixMilli())
	}
	args := []string{which, newest, itoa(int64(limit)), afterAt, after}
	msg, err := b.exec(ctx, lua.Run{Script: scBrowse, Keys: keysOf(scBrowse, q), Args: args}, nil)
	if err != nil {
		return Page{}, errorFor(call{op: op, queue: queue}, err)
	}
	return browseReply(op, msg)
}

// browseReply decodes {more, {id, score, attempts, ...}}.
func browseReply(op string, msg valkey.ValkeyMessage) (Page, error) {
	arr, err := msg.ToArray()
	if err != nil || len(arr) != 2 {
		return Page{}, protocolError(op, "reply %v", msg)
	}
	more, err1 := arr[0].AsInt64()
	flat, err2 := arr[1].ToArray()
	if err1 != nil || err2 != nil || len(flat)%3 != 0 {
		return Page{}, protocolError(op, "reply %v", msg)
	}
	var p Page
	for i := 0; i < len(flat); i += 3 {
		s, _ := flat[i].ToString()
		id, err := keys.ParseJobID(s)
		if err != nil {
			return Page{}, protocolError(op, "reply id %q: %v", s, err)
		}
		at, err1 := flat[i+1].AsInt64()
		token, err2 := flat[i+2].AsInt64()
		if err1 != nil || err2 != nil {
			return Page{}, protocolError(op, "reply %v", msg)
		}
		p.IDs = append(p.IDs, id)
		p.Entries = append(p.Entries, Entry{ID: id, At: time.UnixMilli(at), Token: token})
	}
	if more == 1 && len(p.Entries) > 0 {
		last := p.Entries[len(p.Entries)-1]
		p.Next, p.NextAt = last.ID, last.At
	}
	return p, nil
}
