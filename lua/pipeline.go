package lua

import (
	"context"
	"strings"
	"sync"

	"github.com/valkey-io/valkey-go"
)

// Run is one call of a script: the script, its KEYS and its ARGV, in header order.
type Run struct {
	Script *Script
	Keys   []string
	Args   []string
}

// Doer is what [Pipeline] needs of a connection: a valkey.Client and a
// valkey.DedicatedClient both have it.
type Doer interface {
	B() valkey.Builder
	DoMulti(ctx context.Context, multi ...valkey.Completed) []valkey.ValkeyResult
}

// Pipeline sends runs in one round trip (per node, on a cluster) by EVALSHA, in order, and
// sends the runs the server answered NOSCRIPT again by EVAL in a second round trip. A run
// answered NOSCRIPT did not execute, so sending it again cannot apply it twice; nothing else
// is resent, so a write that may have landed is never sent twice behind the caller's back.
//
// then, when not nil, builds a command that follows the runs in each round trip (WAIT or
// WAITAOF, whose wait must cover every write sent before it on the same connection); its
// reply is the one of the last round trip. replies[i] is the reply of runs[i].
//
// Pipeline knows nothing of what the server holds loaded, so with then it sends every run by
// EVAL, the script's source in full: a NOSCRIPT in the first round trip would leave its wait
// covering nothing and the second round trip would wait again. [Loaded.Pipeline] sends
// EVALSHA where it learned the script is loaded.
func Pipeline(ctx context.Context, c Doer, runs []Run, then func(valkey.Builder) valkey.Completed) (replies []valkey.ValkeyResult, thenReply valkey.ValkeyResult) {
	return (*Loaded)(nil).Pipeline(ctx, c, runs, then)
}

// Ordered sends runs in one round trip (per node, on a cluster) by EVAL, in order, for runs
// whose order matters: each fenced against the one before it, as the ticks of one periodic
// schedule are. Pipeline sends a run answered NOSCRIPT again after the runs that followed it,
// which ran: when the script got loaded between two runs (by another client's EVAL, on a
// server whose cache a restart or a failover emptied), they apply out of order. By EVAL none
// answers NOSCRIPT, at the cost of each script's source per run. replies[i] is the reply of
// runs[i].
func Ordered(ctx context.Context, c Doer, runs []Run) []valkey.ValkeyResult {
	cmds := make(valkey.Commands, len(runs))
	for i, r := range runs {
		cmds[i] = command(c.B(), r, false)
	}
	return c.DoMulti(ctx, cmds...)
}

// Loaded is what one client learned of the scripts its server holds loaded, so that a
// pipeline followed by a wait sends each run by EVALSHA only where its script is known to be
// loaded, and by EVAL elsewhere: the wait then follows scripts that ran, once.
//
// A server caches scripts of its own (each node of a cluster, each primary after a failover)
// and forgets them on SCRIPT FLUSH or a restart. Loaded keeps its belief per cluster slot (a
// dedicated connection goes to its slot's node), once for a client that is not a cluster's,
// and learns from the replies of its pipelines: a script that ran is loaded there, and a
// NOSCRIPT forgets every script of that slot. A belief that went stale costs what a cold
// script cost before: the first round trip's wait, then the runs again by EVAL with a second
// wait; every run still applies at most once and every reply is returned.
//
// The zero Loaded knows nothing and is ready to use; it is safe for concurrent use and must
// not be copied. It holds an entry per slot written to with an acknowledgement (16384 at most,
// some tens of bytes each).
type Loaded struct {
	mu    sync.RWMutex
	slots map[uint16][]uint64 // by place (placeOf): a bit per script of the bundle (Script.bit)
}

// Pipeline is [Pipeline], with what l learned: with then, a run goes by EVALSHA where its
// script is known loaded and by EVAL elsewhere. Every reply teaches l. A nil l knows nothing
// and learns nothing.
func (l *Loaded) Pipeline(ctx context.Context, c Doer, runs []Run, then func(valkey.Builder) valkey.Completed) (replies []valkey.ValkeyResult, thenReply valkey.ValkeyResult) {
	replies = make([]valkey.ValkeyResult, len(runs))
	todo := make([]int, len(runs))
	for i := range todo {
		todo[i] = i
	}
	var places []uint16 // where each run goes; only for l to learn
	if l != nil {
		places = make([]uint16, len(runs))
	}
	for attempt := 0; attempt < 2 && len(todo) > 0; attempt++ {
		cmds := make(valkey.Commands, 0, len(todo)+1)
		for _, i := range todo {
			cmd := command(c.B(), runs[i], attempt == 0)
			if attempt == 0 && (l != nil || then != nil) {
				place := placeOf(&cmd)
				if l != nil {
					places[i] = place
				}
				if then != nil && !l.has(place, runs[i].Script) {
					cmd = command(c.B(), runs[i], false)
				}
			}
			cmds = append(cmds, cmd)
		}
		if then != nil {
			cmds = append(cmds, then(c.B()))
		}
		res := c.DoMulti(ctx, cmds...)
		if l != nil {
			l.learn(runs, todo, places, res)
		}
		again := todo[:0:0]
		for j, i := range todo {
			if attempt == 0 && isNoScript(res[j].Error()) {
				again = append(again, i)
				continue
			}
			replies[i] = res[j]
		}
		if then != nil {
			thenReply = res[len(todo)]
		}
		todo = again
	}
	return replies, thenReply
}

// How valkey-go marks where a command goes: a cluster client gives it its keys' slot (or
// initSlot without keys: any node), any other client noSlot, ORed with the slot.
const (
	initSlot uint16 = 1 << 14
	noSlot   uint16 = 1 << 15
)

// placeOf is the script cache cmd goes to: its slot's on a cluster, noSlot for the one server
// of any other client, initSlot when it cannot be told (any node of a cluster).
func placeOf(cmd *valkey.Completed) uint16 {
	s := cmd.Slot()
	if s&noSlot != 0 {
		return noSlot
	}
	return s
}

// has reports whether s is known loaded at place. A nil l knows nothing.
func (l *Loaded) has(place uint16, s *Script) bool {
	if l == nil || place == initSlot || s.bit == 0 {
		return false
	}
	n := s.bit - 1
	l.mu.RLock()
	defer l.mu.RUnlock()
	set := l.slots[place]
	return set != nil && set[n/64]&(1<<(n%64)) != 0
}

// learn reads the replies of one round trip: res[j] is the reply of runs[todo[j]].
func (l *Loaded) learn(runs []Run, todo []int, places []uint16, res []valkey.ValkeyResult) {
	for j, i := range todo {
		place, s := places[i], runs[i].Script
		if place == initSlot || s.bit == 0 {
			continue
		}
		switch err := res[j].Error(); {
		case isNoScript(err):
			// The server forgot its scripts (SCRIPT FLUSH, a restart, a new primary): all of them.
			l.mu.Lock()
			delete(l.slots, place)
			l.mu.Unlock()
		case ran(s, err) && !l.has(place, s):
			n := s.bit - 1
			l.mu.Lock()
			if l.slots == nil {
				l.slots = map[uint16][]uint64{}
			}
			set := l.slots[place]
			if set == nil {
				set = make([]uint64, (len(bundle)+63)/64)
				l.slots[place] = set
			}
			set[n/64] |= 1 << (n % 64)
			l.mu.Unlock()
		}
	}
}

// ran reports whether a reply shows that s ran, so that the server holds it loaded: a reply,
// nil included, or one of the error replies its header declares. Any other error (a refusal
// before the script, a transport error) teaches nothing.
func ran(s *Script, err error) bool {
	if err == nil {
		return true
	}
	ve, ok := valkey.IsValkeyErr(err)
	if !ok {
		return false
	}
	if ve.IsNil() {
		return true
	}
	code, _, _ := strings.Cut(ve.Error(), " ")
	for _, p := range s.Header.Errors {
		if p.Name == code {
			return true
		}
	}
	return false
}

// command is run as EVALSHA (byHash) or EVAL.
func command(b valkey.Builder, r Run, byHash bool) valkey.Completed {
	n := int64(len(r.Keys))
	if byHash {
		return b.Evalsha().Sha1(r.Script.SHA1).Numkeys(n).Key(r.Keys...).Arg(r.Args...).Build()
	}
	return b.Eval().Script(r.Script.Source).Numkeys(n).Key(r.Keys...).Arg(r.Args...).Build()
}

func isNoScript(err error) bool {
	e, ok := valkey.IsValkeyErr(err)
	return ok && e.IsNoScript()
}
