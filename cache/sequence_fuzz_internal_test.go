package cache

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

// FuzzParseInval: an accepted invalidation message, written back as cache_invalidate writes
// one, reads the same; nothing panics on a payload another publisher sent.
func FuzzParseInval(f *testing.F) {
	for _, s := range []string{"1765000000000000.tok\n5\n1765000000000001\nprevtoken0000000\ntoken00000000000\n42\n43",
		"e\n1\n0\n\nt", "e\n1\n0\n\n", "\n1\n0\n\nt", "e\nx\n0\n\nt", "e\n1\n0\n", "e\n-9\n+3\np\nt\n\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		m, ok := parseInval(p)
		if !ok {
			return
		}
		again := strings.Join(append([]string{m.epoch, strconv.FormatInt(m.seq, 10), strconv.FormatInt(m.at, 10), m.prev, m.token}, m.ids...), "\n")
		m2, ok := parseInval([]byte(again))
		if !ok || m2.epoch != m.epoch || m2.seq != m.seq || m2.at != m.at || m2.prev != m.prev || m2.token != m.token || !slices.Equal(m2.ids, m.ids) {
			t.Fatalf("%q read as %+v, written back as %q, read as %+v", p, m, again, m2)
		}
	})
}

// seqCore is the part of a table the sequence follower touches: what it dropped and flushed.
type seqCore struct {
	tableCore // nil: onMessage needs only the two below
	dropped   [][]string
	flushes   int
}

func (c *seqCore) dropIDs(ids []string) { c.dropped = append(c.dropped, ids) }
func (c *seqCore) flushL1()             { c.flushes++ }

// FuzzInvalSequence feeds a table's sequence follower any run of messages (few epochs, seqs,
// tokens and ids, so runs meet duplicates, gaps, regressions, new epochs and late ones) and
// holds it to the rule coherence rests on: a message never leaves L1 holding its ids. Each
// message either drops them or flushes the table, unless it is this process's own write
// (whose writer dropped them); a message that continues the sequence flushes nothing and is
// then the table's position.
func FuzzInvalSequence(f *testing.F) {
	f.Add([]byte{0, 1, 0, 1, 1, 2, 1, 2, 2, 3, 2, 3})
	f.Add([]byte{0, 1, 0, 1, 0, 5, 3, 4, 0, 2, 1, 2, 1, 1, 0, 1})
	f.Add([]byte{7, 1, 0, 1, 200, 2, 1, 2, 0, 1, 0, 1, 0, 2, 1, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		core := &seqCore{}
		ts := &tableState{name: "t", core: core, own: "own"}
		ts.synced.Store(true)
		epochs := []string{"e1", "e2", "e3"}
		tokens := []string{"", "ownA000000000000", "tB", "tC", "tD", "tE", "tF", "tG"}
		for len(data) >= 4 {
			b0, b1, b2, b3 := data[0], data[1], data[2], data[3]
			data = data[4:]
			if b0&0x80 != 0 {
				ts.mu.Lock()
				ts.resync = true // as an overflow leaves it
				ts.mu.Unlock()
			}
			m := inval{epoch: epochs[int(b0&0x7f)%len(epochs)], seq: int64(b1 % 8), at: 0,
				prev: tokens[int(b2)%len(tokens)], token: tokens[int(b3)%len(tokens)], ids: []string{"id" + strconv.Itoa(int(b1))}}
			before := ts.seen()
			drops, flushes := len(core.dropped), core.flushes
			ts.onMessage(m)
			flushed := core.flushes > flushes
			dropped := len(core.dropped) > drops && slices.Equal(core.dropped[len(core.dropped)-1], m.ids)
			if !flushed && !dropped && !strings.HasPrefix(m.token, ts.own) {
				t.Fatalf("after %+v, the message %+v neither dropped its ids nor flushed", before, m)
			}
			next := m.epoch == before.epoch && m.seq == before.seq+1 && (m.prev == before.last || before.last == "")
			if next && !ts.resync {
				if flushed {
					t.Fatalf("after %+v, the next message %+v flushed", before, m)
				}
				if now := ts.seen(); now.seq != m.seq || now.last != m.token {
					t.Fatalf("after %+v, the next message %+v left the table at %+v", before, m, now)
				}
			}
		}
	})
}

// seqServer is a coherence record as the write scripts keep it, with its history, so that it
// can go back in time to any seq it held (a restore from a snapshot, a lagging replica
// promoted): seq, the token of each write, the ring of the last 64.
type seqServer struct {
	seq    int64
	tokens []string // tokens[s] made seq s; tokens[0] is ""
	made   int      // tokens minted so far, so that no two writes share one
}

func (s *seqServer) write() inval {
	s.made++
	tok := "t" + strconv.Itoa(s.made)
	prev := s.tokens[s.seq]
	s.seq++
	s.tokens = append(s.tokens[:s.seq], tok)
	return inval{epoch: "E", seq: s.seq, prev: prev, token: tok, ids: []string{tok}}
}

func (s *seqServer) record() record {
	r := record{exists: true, epoch: "E", seq: s.seq, last: s.tokens[s.seq]}
	for q := max(s.seq-chainLen+1, 1); q <= s.seq; q++ {
		r.ring[q%chainLen] = strconv.FormatInt(q, 10) + ":" + s.tokens[q]
	}
	return r
}

// FuzzReconcileModel drives a table's sequence follower and its reconcile against a model of
// the server: writes whose messages arrive or are lost (or arrive again), records that go back
// in time, and reconciles (seen; messages in flight arriving or lost and the record going back
// before the read; writes meanwhile; read the record, behind; the grace, in which messages in
// flight arrive or are lost, or stay in flight past the verify, late; verify), and holds it to
// the bound the cache documents. After each
// reconcile: every write whose invalidation was lost, made before the record was read and
// still in the record's history, was followed by a flush of L1; and when the record went back
// below a write the table had applied, a regression was reported (the rows went back too, so
// the table owes a whole-table invalidation). And the other way round, what coherence costs:
// while no message was lost and the record never went back, nothing flushes L1, and while the
// record never went back, no regression is reported (past the table's bounds by design).
func FuzzReconcileModel(f *testing.F) {
	f.Add([]byte{0, 0, 1, 0, 2, 3, 0, 0, 4, 0, 3})
	f.Add([]byte{0, 0, 0, 2, 5, 0, 0, 3, 0, 1, 3})
	f.Add([]byte{0, 0, 0, 3, 4, 0, 0, 1, 0, 0, 3, 4, 2, 0, 3})
	f.Fuzz(func(t *testing.T, ops []byte) {
		core := &seqCore{}
		var owed int
		ts := &tableState{name: "t", core: core, own: "own", onRegression: func() { owed++ }}
		ts.synced.Store(true)
		ts.mu.Lock()
		ts.adopt("E", 0, "")
		ts.mu.Unlock()
		srv := &seqServer{tokens: []string{""}}
		madeAt := map[string]int{} // token -> core.flushes when the write was made
		write := func() inval {
			m := srv.write()
			madeAt[m.token] = core.flushes
			return m
		}
		var flight []inval         // published, not yet delivered or lost
		var delivered []inval      // delivered, for a resubscribe to deliver again
		lost := map[string]int64{} // token -> seq of each write whose message was lost, until a flush
		applied := int64(0)        // the highest seq whose message the table applied
		owedAt := 0                // owed at the end of the last reconcile: one reported since is sent by the next
		rolledUnder := false       // the record went back below a write the table had applied...
		var underAt int64          // ...which was this one
		var flushedAt int          // core.flushes when it did
		// alarms: a regression may be reported. Until the record goes back, a regression
		// report is a false alarm (it costs a whole-table invalidation), unless the table's
		// bounds make it one by design: a message seen again after more than recentLen others
		// were applied, or more than maxChecks gaps before a reconcile.
		alarms := false
		gapsAt := int64(0) // ts.gaps when the last reconcile took its position (later gaps are checked by the next)
		// missed: a message was lost or the record went back. Until then nothing may flush L1.
		missed := false
		noAlarm := func(i int, what string) {
			if !alarms && owed > 0 {
				t.Fatalf("op %d: a regression was reported (%s) though the record never went back", i, what)
			}
			if !missed && core.flushes > 0 {
				t.Fatalf("op %d: L1 was flushed (%s) though no message was lost", i, what)
			}
		}
		apply := func(m inval) {
			before, reported := core.flushes, owed
			ts.onMessage(m)
			if core.flushes > before {
				clear(lost)
			}
			if owed > reported {
				rolledUnder = false
			}
		}
		// known are the tokens of the pairs the table applied in turn (each message delivered
		// the first time, each position a reconcile jumped to), oldest first: it keeps the last
		// recentLen to tell a message seen again.
		var known []string
		deliver := func(m inval, keep bool) {
			if !keep {
				missed = true
				if core.flushes == madeAt[m.token] { // a flush since the write covers its loss
					lost[m.token] = m.seq
				}
				return
			}
			apply(m)
			known = append(known, m.token)
			delivered = append(delivered, m)
			applied = max(applied, m.seq)
		}
		settle := func(keep byte) {
			for i, m := range flight {
				deliver(m, keep>>(i%8)&1 == 0)
			}
			flight = flight[:0]
		}
		// rollback takes the record back by back writes, losing the messages in flight, and
		// says whether that went below a write the table had applied (and which).
		rollback := func(back int64) (under bool, at int64) {
			settle(0xff)
			// Never to before the first write: such a record would not exist, and a vanished
			// record is a documented limit (flushed, not taken for a regression).
			to := max(srv.seq-back, min(srv.seq, 1))
			for tok, seq := range lost {
				if seq > to {
					delete(lost, tok) // gone with the record: no trace anyone can read
				}
			}
			under, at = applied > to, applied
			alarms = alarms || to < srv.seq
			missed = missed || to < srv.seq
			srv.seq = to
			applied = min(applied, to)
			return under, at
		}
		for i := 0; i < len(ops); i++ {
			switch op := ops[i]; op % 5 {
			case 0: // a write; its message in flight
				flight = append(flight, write())
			case 1: // a write, or (one time in four) a message delivered before arrives again
				if op&0x60 == 0x60 && len(delivered) > 0 {
					m := delivered[int(op>>3)%len(delivered)]
					if !slices.Contains(known[max(len(known)-recentLen, 0):], m.token) {
						alarms, missed = true, true // beyond what the table keeps: taken for a rollback
					}
					apply(m)
					noAlarm(i, "a message seen again")
					break
				}
				flight = append(flight, write())
			case 2: // messages in flight arrive, or are lost (the next byte says which)
				var keep byte
				if i+1 < len(ops) {
					i++
					keep = ops[i]
				}
				settle(keep)
				noAlarm(i, "messages")
			case 3: // a reconcile
				var keep byte
				if i+1 < len(ops) {
					i++
					keep = ops[i]
				}
				b := ts.seen()
				gapsB := ts.gaps.Load()
				regressions, flushes := owed, core.flushes
				var midUnder bool
				var midAt int64
				var midFlushes int
				if keep&0x04 != 0 && i+1 < len(ops) {
					// Between the table's position and the record's read: messages in flight
					// arrive or are lost (the next byte says which), and the record may go back.
					// A message applied then may have been published after the read, so a record
					// that went back below it may only show at the next reconcile.
					i++
					pre := ops[i]
					settle(pre)
					if pre&0x80 != 0 {
						// A regression reported since the last reconcile has this one invalidate
						// the whole table, after its read: the rows that go back now are covered.
						if under, at := rollback(int64(pre>>4)%4 + 1); under && owed == owedAt {
							midUnder, midAt, midFlushes = true, at, core.flushes
						}
					}
				}
				for range keep >> 6 { // writes between the table's position and the record's read
					flight = append(flight, write())
				}
				r := srv.record()
				behind := ts.behind(r, b)
				if keep&0x20 != 0 { // the record goes back after this reconcile read it
					if under, at := rollback(int64(keep>>3)%4 + 1); under && !midUnder {
						midUnder, midAt, midFlushes = true, at, core.flushes
					}
				}
				// The newest messages in flight may be later than the grace (a slow subscriber):
				// they stay in flight past the verify, and a later step delivers or loses them.
				var late []inval
				if keep&0x10 != 0 && i+1 < len(ops) {
					i++
					n := min(int(ops[i]%4)+1, len(flight))
					late = slices.Clone(flight[len(flight)-n:])
					flight = flight[:len(flight)-n]
					missed = missed || n > 0 // the verify cannot tell them from lost ones: it may flush
				}
				settle(keep) // the grace
				if behind {
					before := ts.seen()
					ts.verify(r, b)
					if now := ts.seen(); now.seq != before.seq || now.last != before.last {
						// The jump's pairs the table learns from the ring (learn), then its own: after
						// the table's position past a gap, the whole ring past a regression.
						from := before.seq
						if now.regressions != before.regressions {
							from = 0
						}
						for s := max(from+1, r.seq-chainLen+1); s < r.seq; s++ {
							if tok, ok := r.tokenAt(s); ok {
								known = append(known, tok)
							}
						}
						known = append(known, now.last)
					}
				}
				flight = append(late, flight...)
				alarms = alarms || ts.gaps.Load()-gapsAt > maxChecks
				gapsAt = gapsB
				noAlarm(i, "a reconcile")
				if core.flushes > flushes {
					clear(lost)
				}
				for tok, seq := range lost {
					if seq <= r.seq && srv.seq >= seq && srv.tokens[seq] == tok {
						t.Fatalf("op %d: the lost invalidation of write %d (%s) survived a reconcile of %+v from %+v", i, seq, tok, r, b)
					}
				}
				// A record whose ring still reaches back to where the table was tells that it went
				// back; one pushed further (by writes whose messages were lost, or by more than
				// the ring's writes before this reconcile read it) shows only as a gap: a flush
				// since it went back, and no whole-table invalidation.
				switch {
				case !rolledUnder:
				case r.seq-underAt < chainLen && owed == regressions:
					t.Fatalf("op %d: the record went back below seq %d the table applied, and the reconcile of %+v from %+v reported no regression", i, underAt, r, b)
				case core.flushes == flushedAt && owed == regressions:
					t.Fatalf("op %d: the record went back below seq %d the table applied, and neither a flush since nor the reconcile of %+v from %+v told", i, underAt, r, b)
				}
				rolledUnder, owedAt = false, owed
				if midUnder && owed == regressions { // nothing this reconcile did covers it: the next must
					rolledUnder, underAt, flushedAt = true, midAt, midFlushes
				}
			case 4: // the record goes back in time (the next byte: how far), messages in flight lost
				back := int64(1)
				if i+1 < len(ops) {
					i++
					back = int64(ops[i]%8) + 1
				}
				// A regression reported since the last reconcile makes the next one invalidate
				// the whole table, after this: the rows that go back now are covered.
				if under, at := rollback(back); under && !rolledUnder && owed == owedAt {
					rolledUnder, underAt, flushedAt = true, at, core.flushes
				}
			}
		}
	})
}
