package cache

import (
	"slices"
	"strconv"
	"strings"
	"time"
)

// Following a table's sequence. Each write's script bumps seq in the table's coherence
// record, sets its field last to the write's token, and publishes (epoch, seq, prev, token)
// where prev is the token it replaced. A subscriber applies a message in order when its seq
// is the next one and its prev is the token it applied last. Anything else in the same
// epoch is one of:
//
//   - a gap (seq jumps ahead): messages were lost; flush, and have a reconcile, run at once,
//     check that the record's ring still passes through where the table was before the gap,
//     and before every gap since the last check (a record that went back in time and was
//     pushed past such a position by writes whose messages were lost shows only as gaps; the
//     position applied between two gaps is the only witness of a rollback to between them,
//     as long as the record's ring reaches it);
//   - a duplicate: a (seq, token) pair it applied recently, before a gap too (a token names
//     one write); only its ids are dropped again;
//   - a regression: the record went back in time (Valkey restored from a snapshot, or a
//     replica that had not seen the last writes promoted), so the invalidations after the
//     restored point are lost for ever: a seq at or below the last one that is not a
//     duplicate, or the next seq whose prev is not the token applied last (new writes
//     after the restore pushed seq past where it was, so seq alone cannot tell). The table's
//     L1 is flushed once and the new sequence followed from there; and since the rows went
//     back with the record (a row a lost invalidation had deleted is there again), the
//     table's rows are invalidated too: a whole-table invalidation, sent by the reconcile.
//
// The reconcile compares the record with what was seen before it read it: behind that is a
// regression, the same seq with another token too, and so is a record ahead of it whose
// ring of recent tokens (the last 64) names another token at the seq seen; ahead of it
// otherwise is either messages in flight (then they are applied within the grace) or lost
// ones (flush).

// recentLen is how many applied (seq, token) pairs a table keeps to recognise duplicates.
const recentLen = 64

// position is a point of a table's sequence: a seq and the token of the write that made it.
type position struct {
	seq   int64
	token string
}

// seen is what a table had applied at one moment, for a reconcile to compare a record with.
type seen struct {
	epoch       string
	seq         int64
	last        string
	checks      checks
	regressions int64
	left        int64 // epochs the table had left (tableState.left)
}

// pastEpoch is an epoch the table left, and n, the count of epochs left with it: it was left
// before a position taken with seen.left >= n.
type pastEpoch struct {
	epoch string
	n     int64
}

// maxChecks bounds the positions a table keeps for its next reconcile to check.
const maxChecks = 16

// checks are the positions a table was at when gaps left them, oldest first, that no
// reconcile has checked yet.
type checks struct {
	at   [maxChecks]position
	n    int
	lost bool // more gaps than maxChecks: the next reconcile cannot tell the record is on the sequence
}

// add keeps p for the next reconcile (a position without a token has nothing to check).
func (c *checks) add(p position) {
	switch {
	case p.token == "":
	case c.n == maxChecks:
		c.lost = true
	default:
		c.at[c.n] = p
		c.n++
	}
}

// drop forgets the positions of b, which a reconcile checked, if c still begins with them.
func (c *checks) drop(b checks) {
	if b.n == 0 || b.n > c.n || !slices.Equal(c.at[:b.n], b.at[:b.n]) {
		return
	}
	n := copy(c.at[:], c.at[b.n:c.n])
	clear(c.at[n:c.n])
	c.n = n
}

// inval is a parsed invalidation message.
type inval struct {
	epoch       string
	seq, at     int64
	prev, token string
	ids         []string
}

// parseInval reads "<epoch>\n<seq>\n<µs>\n<prev>\n<token>[\n<id>...]".
func parseInval(p []byte) (inval, bool) {
	parts := strings.Split(string(p), "\n")
	if len(parts) < 5 || parts[0] == "" {
		return inval{}, false
	}
	seq, err1 := strconv.ParseInt(parts[1], 10, 64)
	at, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil {
		return inval{}, false
	}
	return inval{epoch: parts[0], seq: seq, at: at, prev: parts[3], token: parts[4], ids: parts[5:]}, true
}

// applied records (seq, token) as the table's position. Called with mu held.
func (ts *tableState) applied(seq int64, token string) {
	ts.seq, ts.last = seq, token
	ts.remember(seq, token)
}

// remember keeps (seq, token) among the recent pairs, for knows. Called with mu held.
func (ts *tableState) remember(seq int64, token string) {
	if token == "" {
		return
	}
	ts.recent[ts.recentI] = position{seq, token}
	ts.recentI = (ts.recentI + 1) % recentLen
}

// learn remembers the pairs of r's ring after seq after, up to r's own: the writes a
// reconcile moved the table past, whose messages may still come (a slow subscriber) and are
// then duplicates, not a regression. Called with mu held.
func (ts *tableState) learn(r record, after int64) {
	for s := max(after+1, r.seq-chainLen+1); s < r.seq; s++ {
		if t, ok := r.tokenAt(s); ok {
			ts.remember(s, t)
		}
	}
}

// knows reports whether (seq, token) was applied recently, before a gap or after it: a token
// names one write, so a pair applied before is a duplicate. Called with mu held.
func (ts *tableState) knows(seq int64, token string) bool {
	for _, p := range ts.recent {
		if p.seq == seq && p.token == token {
			return true
		}
	}
	return false
}

// follow starts over from (seq, token), forgetting the sequence it left. Called with mu held.
func (ts *tableState) follow(seq int64, token string) {
	ts.recent = [recentLen]position{}
	ts.checks = checks{}
	ts.skip(seq, token)
}

// skip moves past a gap to (seq, token): the pairs applied before it stay known (a message
// of theirs that comes again is a duplicate), but the run of pairs applied without a hole
// starts again at seq. Called with mu held.
func (ts *tableState) skip(seq int64, token string) {
	ts.runFrom = seq
	ts.applied(seq, token)
}

// seen is the table's position now.
func (ts *tableState) seen() seen {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return seen{epoch: ts.epoch, seq: ts.seq, last: ts.last, checks: ts.checks, regressions: ts.regressions.Load(), left: ts.left}
}

func (ts *tableState) isRetired(epoch string) bool {
	_, ok := ts.retiredAt(epoch)
	return ok
}

// retiredAt reports whether epoch is a past one, and the pastEpoch n it was left with.
func (ts *tableState) retiredAt(epoch string) (int64, bool) {
	for _, e := range ts.retired {
		if e.epoch == epoch {
			return e.n, true
		}
	}
	return 0, false
}

// adopt makes (epoch, seq, token) the seen state, retiring the old epoch. Called with mu held.
func (ts *tableState) adopt(epoch string, seq int64, token string) {
	// An epoch adopted again (a record that went back to it) is no longer a past one.
	ts.retired = slices.DeleteFunc(ts.retired, func(e pastEpoch) bool { return e.epoch == epoch })
	if ts.epoch != "" && ts.epoch != epoch {
		ts.left++
		ts.retired = append(ts.retired, pastEpoch{epoch: ts.epoch, n: ts.left})
		if len(ts.retired) > maxRetired {
			ts.retired = ts.retired[1:]
		}
	}
	ts.epoch = epoch
	ts.follow(seq, token)
}

// onMessage applies one invalidation message.
func (ts *tableState) onMessage(m inval) {
	ts.received.Add(1)
	if d := time.Now().UnixMicro() - m.at; m.at > 0 {
		ns := max(d, 0) * int64(time.Microsecond)
		ts.delays.record(time.Duration(ns))
		ts.delayN.Add(1)
		ts.delaySum.Add(ns)
		for {
			mx := ts.delayMax.Load()
			if ns <= mx || ts.delayMax.CompareAndSwap(mx, ns) {
				break
			}
		}
	}
	flush, regressed, gap := false, false, false
	ts.mu.Lock()
	switch {
	case !ts.synced.Load():
		// The initial read has not happened: L1 takes no installs yet, so only remember the
		// newest position for it.
		if m.epoch != ts.preEpoch || m.seq > ts.preSeq {
			ts.preEpoch, ts.preSeq, ts.preLast = m.epoch, m.seq, m.token
		}
	case ts.resync:
		ts.resync = false
		ts.adopt(m.epoch, m.seq, m.token)
	case m.epoch == ts.epoch:
		switch {
		case m.seq == ts.seq+1 && (m.prev == ts.last || ts.last == ""):
			ts.applied(m.seq, m.token)
		case m.seq == ts.seq+1:
			// The next seq, but not after the write applied last: the record went back and
			// new writes brought it here.
			ts.regressions.Add(1)
			flush, regressed = true, true
			ts.follow(m.seq, m.token)
		case m.seq > ts.seq+1:
			ts.gaps.Add(1)
			flush, gap = true, true
			ts.checks.add(position{ts.seq, ts.last})
			ts.skip(m.seq, m.token)
		case ts.knows(m.seq, m.token) || m.token == "":
			// A duplicate (a message seen again across a resubscribe): its ids are dropped
			// below, nothing else changes.
		default:
			ts.regressions.Add(1)
			flush, regressed = true, true
			ts.follow(m.seq, m.token)
		}
	case ts.isRetired(m.epoch):
		// A late message of an epoch already left: its ids are dropped below.
	case ts.epoch == "" && m.seq == 1:
		// The record was just made: nothing was missed. By a flush (InvalidateAll on a table
		// without a record yet: its message names no ids) every row went, and L1's go too.
		ts.adopt(m.epoch, m.seq, m.token)
		flush = len(m.ids) == 0
	default:
		flush = true // a new epoch: a whole-table invalidation or a lost record
		ts.adopt(m.epoch, m.seq, m.token)
	}
	ts.mu.Unlock()
	if regressed {
		ts.regressed()
	} else if gap && ts.onGap != nil {
		ts.onGap()
	}
	if flush {
		ts.flush()
		return
	}
	// This process's own write: its writer dropped the ids from L1 after the script ran
	// (which refuses any install begun before), so applying them again only costs.
	if len(m.ids) > 0 && !strings.HasPrefix(m.token, ts.own) {
		ts.core.dropIDs(m.ids)
	}
}
