package bus

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
)

// The scripts the bus runs, looked up once. Each one's KEYS come from its header (keysOf).
var (
	scEnqueue       = lua.Get("enqueue")
	scClaim         = lua.Get("claim")
	scComplete      = lua.Get("complete")
	scCompleteMany  = lua.Get("completemany")
	scCompleteClaim = lua.Get("completeclaim")
	scFail          = lua.Get("fail")
	scExtend        = lua.Get("extend")
	scSnooze        = lua.Get("snooze")
	scPromote       = lua.Get("promote")
	scReap          = lua.Get("reap")
	scPause         = lua.Get("pause")
	scResume        = lua.Get("resume")
	scConfigure     = lua.Get("configure")
	scCancel        = lua.Get("cancel")
	scRetry         = lua.Get("retry")
	scPurge         = lua.Get("purge")
	scCounts        = lua.Get("counts")
	scLookup        = lua.Get("lookup")
	scDue           = lua.Get("due")
	scBrowse        = lua.Get("browse")
	scDrop          = lua.Get("drop")

	// Lanes (lanes*.go).
	scLaneEnqueue = lua.Get("laneenqueue")
	scLaneClaim   = lua.Get("laneclaim")
	scRateLimited = lua.Get("ratelimited")
	scLaneSet     = lua.Get("laneset")
	scFlowSet     = lua.Get("flowset")
	scLanePause   = lua.Get("lanepause")
	scLaneInfo    = lua.Get("laneinfo")
)

// scriptKeys is each bus script's KEYS, in header order, read from the headers themselves, so
// the Go side cannot drift from the protocol.
var scriptKeys = headerKeys(scEnqueue, scClaim, scComplete, scCompleteMany, scCompleteClaim, scFail, scExtend, scSnooze,
	scPromote, scReap, scPause, scResume, scConfigure, scCancel, scRetry, scPurge, scCounts, scLookup, scDue, scBrowse, scDrop,
	scLaneEnqueue, scLaneClaim, scRateLimited, scLaneSet, scFlowSet, scLanePause, scLaneInfo)

// headerKeys parses the grammar form of each script's declared KEYS (emq:{<q>}:pending) into
// its type. The bundle is compiled in, so a header that does not parse is a bug and panics.
func headerKeys(scripts ...*lua.Script) map[*lua.Script][]keys.Type {
	out := make(map[*lua.Script][]keys.Type, len(scripts))
	for _, s := range scripts {
		types := make([]keys.Type, len(s.Header.Keys))
		for i, p := range s.Header.Keys {
			k, err := keys.Parse(strings.Replace(p.Name, "<q>", "q", 1))
			if err != nil || k.Role != keys.Bus || k.ID != "" {
				panic(fmt.Sprintf("bus: script %s: KEYS[%d] %q is not a queue key of the grammar", s.Name, i+1, p.Name))
			}
			types[i] = k.Type
		}
		out[s] = types
	}
	return out
}

// queueKey is q's key of type t.
func queueKey(q keys.Queue, t keys.Type) string {
	switch t {
	case keys.Pending:
		return q.Pending()
	case keys.Active:
		return q.Active()
	case keys.Schedule:
		return q.Schedule()
	case keys.Dead:
		return q.Dead()
	case keys.Meta:
		return q.Meta()
	case keys.Wake:
		return q.Wake()
	case keys.Flow:
		return q.Flow()
	case keys.Lanes:
		return q.Lanes()
	case keys.LaneActive:
		return q.LaneActive()
	case keys.LaneReady:
		return q.LaneReady()
	case keys.LaneWait:
		return q.LaneWait()
	case keys.JobLane:
		return q.JobLane()
	case keys.Urgent:
		return q.Urgent()
	case keys.FlowLog:
		return q.FlowLog()
	}
	panic("bus: no queue key of type " + t.String())
}

// keysOf is the KEYS of s for queue q.
func keysOf(s *lua.Script, q keys.Queue) []string {
	types := scriptKeys[s]
	out := make([]string, len(types))
	for i, t := range types {
		out[i] = queueKey(q, t)
	}
	return out
}

// exec runs one script and returns its reply, with the ack the call asked for. The error is
// the script's (translated), else the ack's (an *AckError, with a valid reply), else nil.
func (b *Bus) exec(ctx context.Context, r lua.Run, ack *Ack) (valkey.ValkeyMessage, error) {
	out, err := b.execMulti(ctx, []lua.Run{r}, ack)
	if len(out) == 0 {
		return valkey.ValkeyMessage{}, err
	}
	if out[0].err != nil {
		return valkey.ValkeyMessage{}, out[0].err
	}
	return out[0].msg, err
}

// result is one reply of execMulti.
type result struct {
	msg valkey.ValkeyMessage
	err error // translated
}

// execMulti runs several scripts of one queue (one slot) in one round trip, in order. With a
// Replicated or Persisted ack it runs them on one dedicated connection followed by WAIT or
// WAITAOF, so the wait covers exactly these writes on the node that applied them. The second
// return value is the ack's error (an *AckError) or a transport error of the whole call.
//
// A script the cluster refused before running it (MOVED, ASK, TRYAGAIN, CLUSTERDOWN: a
// failover or a slot migration under way) is sent again, alone with the others so refused,
// after a short pause, a bounded number of times: it did not run, so a second send cannot
// apply it twice. valkey-go follows MOVED and ASK itself, but not on a dedicated connection,
// and it does not resend a write on TRYAGAIN or CLUSTERDOWN. A script that reads every key
// it derives before its first write (readsFirst) is resent too when it was refused a key the
// node does not hold (nonLocal). Any other error reply may come from a script that ran in
// part, and is returned as it is.
func (b *Bus) execMulti(ctx context.Context, runs []lua.Run, ack *Ack) ([]result, error) {
	if ack != nil && ack.Durability != Primary {
		if err := ack.validate(); err != nil {
			return nil, err
		}
	} else {
		ack = nil
	}
	out := make([]result, len(runs))
	todo := make([]int, len(runs))
	for i := range todo {
		todo[i] = i
	}
	var ackErr error
	pause := redirectPause
	for attempt := 1; ; attempt++ {
		batch := make([]lua.Run, len(todo))
		for j, i := range todo {
			batch[j] = runs[i]
		}
		got, err := b.execOnce(ctx, batch, ack)
		if got == nil {
			return nil, err
		}
		again := todo[:0:0]
		for j, i := range todo {
			if attempt < redirectAttempts && (redirected(got[j].err) || nonLocal(got[j].err) && readsFirst[runs[i].Script]) && ctx.Err() == nil {
				again = append(again, i)
				b.resent.Add(1)
				continue
			}
			out[i] = got[j]
		}
		if len(again) < len(todo) && ackErr == nil {
			ackErr = err // the wait covered scripts that ran
		}
		if len(again) == 0 {
			return out, ackErr
		}
		todo = again
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		pause = min(2*pause, maxRedirectPause)
	}
}

// How execMulti resends scripts the cluster refused before running them: up to
// redirectAttempts sends, pausing 10 ms, doubling up to 250 ms (about 4 s in all), so that a
// failover or a migration's last step completes meanwhile.
const (
	redirectAttempts = 20
	redirectPause    = 10 * time.Millisecond
	maxRedirectPause = 250 * time.Millisecond
)

// readsFirst are the scripts that touch every key they derive (the new job rows, the guards,
// a lane's pending set) before their first write, so that a refusal to touch one (nonLocal)
// comes before anything was written: enqueue's to a busy queue whose slot is migrating, whose
// declared keys are all still on the source, meets it at the first new job row.
var readsFirst = map[*lua.Script]bool{scEnqueue: true, scLaneEnqueue: true}

// nonLocal reports whether err is a script's refusal to touch a key its node does not hold
// while the key's slot migrates: an ASK raised inside the script, at the key's first touch.
func nonLocal(err error) bool {
	ve, ok := valkey.IsValkeyErr(err)
	return ok && strings.Contains(ve.Error(), "non local key")
}

// redirected reports whether err is a cluster reply that refuses a command before it runs.
func redirected(err error) bool {
	ve, ok := valkey.IsValkeyErr(err)
	if !ok {
		return false
	}
	if _, ok := ve.IsMoved(); ok {
		return true
	}
	if _, ok := ve.IsAsk(); ok {
		return true
	}
	return ve.IsTryAgain() || ve.IsClusterDown()
}

// execOnce is one send of execMulti; got is nil only when nothing was sent. With ack, the
// scripts go through b.loaded: where they are not known loaded (a fresh server, after SCRIPT
// FLUSH or on a node not written to yet) they are sent by EVAL, so the wait that shares their
// round trip follows scripts that ran and is not waited again after a NOSCRIPT.
func (b *Bus) execOnce(ctx context.Context, runs []lua.Run, ack *Ack) (got []result, err error) {
	if ack == nil {
		if len(runs) == 1 {
			msg, err := runs[0].Script.Exec(ctx, b.client, runs[0].Keys, runs[0].Args).ToMessage()
			return []result{{msg, translate(err)}}, nil
		}
		replies, _ := lua.Pipeline(ctx, b.client, runs, nil)
		return results(replies), nil
	}
	var ackErr error
	err = b.client.Dedicated(func(dc valkey.DedicatedClient) error {
		if ack.fits(ctx) {
			replies, wait := b.loaded.Pipeline(ctx, dc, runs, ack.command) // one round trip
			got, ackErr = results(replies), ack.check(wait)
			return nil
		}
		// ctx may end during the wait: valkey-go fails a whole pipeline when it does, the
		// replies already received included, so the wait goes in a round trip of its own.
		// Replies of scripts that ran are then kept whatever happens to the wait, which is
		// asked to end before ctx does (Ack.within).
		replies, _ := b.loaded.Pipeline(ctx, dc, runs, nil)
		got = results(replies)
		within := ack.within(ctx)
		ackErr = within.check(dc.Do(ctx, within.command(dc.B())))
		return nil
	})
	if err != nil {
		return nil, err
	}
	return got, ackErr
}

// results reads and translates pipelined replies.
func results(replies []valkey.ValkeyResult) []result {
	out := make([]result, len(replies))
	for i, r := range replies {
		msg, err := r.ToMessage()
		out[i] = result{msg, translate(err)}
	}
	return out
}
