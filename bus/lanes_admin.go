package bus

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
)

// The operator's verbs of lanes: set and read limits, pause and resume a lane, read lanes
// with their counts, list them.

// SetLaneLimits sets lane's own limits in queue, replacing the ones it had; zero fields are
// unset (they fall back to the queue's defaults, see [Bus.SetQueueLimits]) and the zero
// LaneLimits clears them. The lane's pause is kept. A negative or absurdly large field is
// refused with [ErrInvalid] naming it, and nothing is written. The limits apply from the next
// claim; a lane that a raised cap gives room again is served from the next completion of one
// of its jobs. A change of the lane's Rate starts the new rate afresh: a lane its old rate held
// back is released at once, and so is one a [RateLimited] closed (the two holds are one).
// [Bus.SetQueueLimits] does the same for the queue's Rate and the lanes' default Rate.
func (b *Bus) SetLaneLimits(ctx context.Context, queue, lane string, l LaneLimits) error {
	const op = "laneset"
	q, err := b.queue(op, queue)
	if err != nil {
		return err
	}
	if err := laneArg(op, queue, lane); err != nil {
		return err
	}
	if err := l.validate(fmt.Sprintf("%s in queue %s, lane %s: LaneLimits", op, queue, lane)); err != nil {
		return err
	}
	args := append([]string{lane}, l.args()...)
	_, err = b.exec(ctx, lua.Run{Script: scLaneSet, Keys: keysOf(scLaneSet, q), Args: args}, nil)
	return errorFor(call{op: op, queue: queue}, err)
}

// SetQueueLimits sets queue's own rate and the default limits of its lanes, replacing the
// ones it had; the zero QueueLimits clears them. A queue with a rate is claimed through the
// lanes' claim (its jobs without a lane too). Bad fields are refused as by
// [Bus.SetLaneLimits]. A change of a rate starts the new rate afresh, from the next claim: a
// new queue Rate forgets the queue's claims so far; a new default lane Rate (Lanes.Rate)
// forgets the claims of every lane without a Rate of its own, and releases those of them its
// old rate or a [RateLimited] held back (at most the 10000 held the longest in one call; the
// two holds are one). A [RateLimited] hold of the queue's jobs without a lane is kept: no rate
// set it. Idle workers are woken when jobs wait.
func (b *Bus) SetQueueLimits(ctx context.Context, queue string, l QueueLimits) error {
	const op = "flowset"
	q, err := b.queue(op, queue)
	if err != nil {
		return err
	}
	if err := l.Rate.validate(fmt.Sprintf("%s in queue %s: QueueLimits.Rate", op, queue)); err != nil {
		return err
	}
	if err := l.Lanes.validate(fmt.Sprintf("%s in queue %s: QueueLimits.Lanes", op, queue)); err != nil {
		return err
	}
	rate := LaneLimits{Rate: l.Rate}.args()[1:4]
	args := append(rate, l.Lanes.args()...)
	_, err = b.exec(ctx, lua.Run{Script: scFlowSet, Keys: keysOf(scFlowSet, q), Args: args}, nil)
	b.noteFlow(queue, true)
	return errorFor(call{op: op, queue: queue}, err)
}

// PauseLane stops lane of queue from giving work: claims skip it while its jobs wait, and its
// claimed jobs run on. Pausing a paused lane is not an error.
func (b *Bus) PauseLane(ctx context.Context, queue, lane string) error {
	return b.pauseLane(ctx, queue, lane, "1")
}

// ResumeLane lets a paused lane give work again and wakes idle workers when it has waiting
// jobs. Resuming a lane that is not paused is not an error.
func (b *Bus) ResumeLane(ctx context.Context, queue, lane string) error {
	return b.pauseLane(ctx, queue, lane, "0")
}

func (b *Bus) pauseLane(ctx context.Context, queue, lane, paused string) error {
	const op = "lanepause"
	q, err := b.queue(op, queue)
	if err != nil {
		return err
	}
	if err := laneArg(op, queue, lane); err != nil {
		return err
	}
	_, err = b.exec(ctx, lua.Run{Script: scLanePause, Keys: keysOf(scLanePause, q), Args: []string{lane, paused}}, nil)
	return errorFor(call{op: op, queue: queue}, err)
}

// LaneInfo is one lane as [Bus.Lanes] reads it. A lane that does not exist reads as empty.
type LaneInfo struct {
	Name string
	// Own are the lane's own limits; Limits the ones in force: its own, else the queue's
	// defaults, field by field, with a Weight of 1 and a Rate's Per and Burst filled in.
	Own, Limits LaneLimits
	Paused      bool
	// Waiting is how many of its jobs of priority 0 wait in its set; its jobs of a higher
	// priority wait in the queue's urgent set and are counted in [Counts.Urgent].
	Waiting int64
	// Active is how many of its jobs are claimed: the count its cap is checked against.
	Active int64
	// Ready is true when the lane is in the round robin (it has waiting jobs and was, when
	// last seen, able to give work).
	Ready bool
	// HeldUntil is when a lane held back by its rate or by a handler's [RateLimited] may give
	// work again (server clock); zero when it is not held.
	HeldUntil time.Time
}

// FlowInfo is a queue's flow control as [Bus.Lanes] reads it.
type FlowInfo struct {
	QueueLimits
	// HeldUntil is when the queue's jobs without a lane may be claimed again after a handler's
	// [RateLimited]; zero when they are not held.
	HeldUntil time.Time
	// Now is the server's clock at the read.
	Now time.Time
}

// Lanes reads queue's flow control and the named lanes, in one atomic snapshot (at most 1000
// lanes a call). Names follow the rule of names; a lane that does not exist reads as empty.
func (b *Bus) Lanes(ctx context.Context, queue string, lanes ...string) (FlowInfo, []LaneInfo, error) {
	const op = "laneinfo"
	q, err := b.queue(op, queue)
	if err != nil {
		return FlowInfo{}, nil, err
	}
	if len(lanes) > 1000 {
		return FlowInfo{}, nil, fmt.Errorf("%w: %s in queue %s: %d lanes; at most 1000 a call", ErrInvalid, op, queue, len(lanes))
	}
	for _, l := range lanes {
		if err := laneArg(op, queue, l); err != nil {
			return FlowInfo{}, nil, err
		}
	}
	msg, err := b.exec(ctx, lua.Run{Script: scLaneInfo, Keys: keysOf(scLaneInfo, q), Args: lanes}, nil)
	if err != nil {
		return FlowInfo{}, nil, errorFor(call{op: op, queue: queue}, err)
	}
	return laneInfoReply(msg, lanes)
}

// Lane reads one lane of queue; see [Bus.Lanes].
func (b *Bus) Lane(ctx context.Context, queue, lane string) (LaneInfo, error) {
	_, infos, err := b.Lanes(ctx, queue, lane)
	if err != nil {
		return LaneInfo{}, err
	}
	return infos[0], nil
}

// laneInfoReply decodes {rate, per, burst, lane, hold, now, then 5 per lane}.
func laneInfoReply(msg valkey.ValkeyMessage, lanes []string) (FlowInfo, []LaneInfo, error) {
	const op = "laneinfo"
	arr, err := msg.ToArray()
	if err != nil || len(arr) != 6+5*len(lanes) {
		return FlowInfo{}, nil, protocolError(op, "reply %v", msg)
	}
	str := func(i int) string { s, _ := arr[i].ToString(); return s }
	num := func(i int) int64 { n, _ := arr[i].AsInt64(); return n }
	var f FlowInfo
	rate := str(0) + ":" + str(1) + ":" + str(2)
	if rate != "::" {
		var err error
		var l LaneLimits
		if l, _, err = parseLimits(":" + rate + "::"); err != nil {
			return FlowInfo{}, nil, err
		}
		f.Rate = l.Rate
	}
	if f.Lanes, _, err = parseLimits(str(3)); err != nil {
		return FlowInfo{}, nil, err
	}
	if h := num(4); h > 0 {
		f.HeldUntil = time.UnixMilli(h)
	}
	f.Now = time.UnixMilli(num(5))
	out := make([]LaneInfo, len(lanes))
	for i, name := range lanes {
		j := 6 + 5*i
		own, paused, err := parseLimits(str(j))
		if err != nil {
			return FlowInfo{}, nil, err
		}
		li := LaneInfo{Name: name, Own: own, Limits: own.merged(f.Lanes), Paused: paused, Waiting: num(j + 1), Active: num(j + 2), Ready: num(j+3) == 1}
		if h := num(j + 4); h > f.Now.UnixMilli() {
			li.HeldUntil = time.UnixMilli(h)
		}
		out[i] = li
	}
	return f, out, nil
}

// LanesOpts are the options of [Bus.ListLanes]; nil means defaults.
type LanesOpts struct {
	// Set is the index to list: keys.LaneReady (the default: the lanes with waiting work, in
	// the order the round robin serves them), keys.LaneWait (held back, soonest first),
	// keys.LaneActive (the lanes with claimed jobs) or keys.Lanes (the lanes with limits of
	// their own).
	Set keys.Type
	// Cursor is the Next of the previous page; "" starts at the head.
	Cursor string
	// Limit bounds the page. Default 100 ([DefaultLimit]).
	Limit int
}

// LanePage is one page of [Bus.ListLanes].
type LanePage struct {
	Lanes []string
	// Next is the cursor of the next page; "" when this page is the last.
	Next string
}

// ListLanes lists the names of queue's lanes in one of its lane indexes, a page at a time
// (read without a script; a page of a set that changes meanwhile may repeat or miss a lane).
// The member "" of keys.LaneReady, the queue's own stream, is listed as "".
func (b *Bus) ListLanes(ctx context.Context, queue string, opts *LanesOpts) (LanePage, error) {
	const op = "lanes"
	var o LanesOpts
	if opts != nil {
		o = *opts
	}
	q, err := b.queue(op, queue)
	if err != nil {
		return LanePage{}, err
	}
	limit, err := limitOf(op, queue, true, func() int { return o.Limit })
	if err != nil {
		return LanePage{}, err
	}
	// A cursor of the hashes (laneactive, lanes) may carry "+<skip>": HSCAN answers a batch of
	// any size (a small hash whole), and the page went as far as skip into it.
	var cursor, skip uint64
	if o.Cursor != "" {
		cur, rest, hasSkip := strings.Cut(o.Cursor, "+")
		cursor, err = strconv.ParseUint(cur, 10, 64)
		if err == nil && hasSkip {
			skip, err = strconv.ParseUint(rest, 10, 64)
			if o.Set != keys.LaneActive && o.Set != keys.Lanes {
				err = errors.New("not a cursor of this set")
			}
		}
		if err != nil {
			return LanePage{}, fmt.Errorf("%w: %s in queue %s: cursor %q", ErrInvalid, op, queue, o.Cursor)
		}
	}
	c := b.client
	var p LanePage
	switch o.Set {
	case 0, keys.LaneReady, keys.LaneWait:
		key := q.LaneReady()
		if o.Set == keys.LaneWait {
			key = q.LaneWait()
		}
		ss, err := c.Do(ctx, c.B().Zrange().Key(key).Min(strconv.FormatUint(cursor, 10)).Max(strconv.FormatUint(cursor+uint64(limit), 10)).Build()).AsStrSlice()
		if err != nil {
			return LanePage{}, errorFor(call{op: op, queue: queue}, translate(err))
		}
		if len(ss) > limit {
			ss, p.Next = ss[:limit], strconv.FormatUint(cursor+uint64(limit), 10)
		}
		p.Lanes = ss
	case keys.LaneActive, keys.Lanes:
		key := q.LaneActive()
		if o.Set == keys.Lanes {
			key = q.Lanes()
		}
		e, err := c.Do(ctx, c.B().Hscan().Key(key).Cursor(cursor).Count(int64(limit)).Build()).AsScanEntry()
		if err != nil {
			return LanePage{}, errorFor(call{op: op, queue: queue}, translate(err))
		}
		for i := 0; i < len(e.Elements); i += 2 {
			p.Lanes = append(p.Lanes, e.Elements[i])
		}
		p.Lanes = p.Lanes[min(skip, uint64(len(p.Lanes))):]
		switch {
		case len(p.Lanes) > limit: // the rest of this batch is the next page's
			p.Lanes, p.Next = p.Lanes[:limit], strconv.FormatUint(cursor, 10)+"+"+strconv.FormatUint(skip+uint64(limit), 10)
		case e.Cursor != 0:
			p.Next = strconv.FormatUint(e.Cursor, 10)
		}
	default:
		return LanePage{}, fmt.Errorf("%w: %s in queue %s: set %s; lanes are listed from laneready, lanewait, laneactive or lanes", ErrInvalid, op, queue, o.Set)
	}
	return p, nil
}
