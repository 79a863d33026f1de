package cache

// The reconcile's side of following a table's sequence: a record read from Valkey compared
// with what the table had applied when the read was made (behind, diverged), and the table
// settled against it once the grace for messages in flight has passed (verify). See
// sequence.go for the message side and what a gap, a duplicate and a regression are.

// diverged reports whether r, read after b was seen, is not on the sequence the table
// followed: behind b, at b's seq with another token, ahead of b on a ring of tokens that
// does not pass through b (or through where the table was before each gap b had not
// checked, or more gaps than it kept), or between b and now at a position never applied.
// Called with mu held.
func (ts *tableState) diverged(r record, b seen) bool {
	if r.epoch != b.epoch || b.epoch == "" {
		return false // an epoch change is handled as such
	}
	if b.checks.lost {
		return true
	}
	for _, g := range b.checks.at[:b.checks.n] {
		// A gap since: the record must still pass through where the table was before it. A
		// record whose ring no longer reaches there cannot tell (a gap has a reconcile run at
		// once, so that its read comes before 64 more writes on all but the busiest tables).
		if t, ok := r.tokenAt(g.seq); r.seq < g.seq || ok && t != g.token {
			return true
		}
	}
	if ts.epoch == r.epoch && ts.seq > b.seq && ts.last != "" && r.last != "" {
		// Messages applied since b took the table to a position the record must pass through
		// too: one at or ahead of it that names another token there went back below a write
		// the table applied since b (and was pushed on by writes whose messages were lost);
		// one behind it must be at a pair the table applied (see the end).
		if r.seq >= ts.seq {
			if t, ok := r.tokenAt(ts.seq); ok && t != ts.last {
				return true
			}
		} else if ts.reaches(r.seq) && !ts.knows(r.seq, r.last) {
			return true
		}
	}
	switch {
	case r.seq < b.seq:
		return true
	case r.last == "" || b.last == "":
		return false // a record (or a position) without a token: seq is all there is
	case r.seq == b.seq:
		return r.last != b.last
	}
	if t, ok := r.tokenAt(b.seq); ok && t != b.last {
		// The record moved past b, but not from b: it went back and new writes brought it
		// here (the messages that would have told were lost too).
		return true
	}
	// Applied since b, if the recent pairs still reach back to r.seq. More than recentLen
	// messages applied while the record was read and the grace ran (a busy table, a slow
	// read) leave nothing to compare it with; each of those messages was checked against the
	// one before it, so the record is not taken for a regression.
	return r.seq <= ts.seq && ts.reaches(r.seq) && !ts.knows(r.seq, r.last)
}

// reaches reports whether the recent pairs applied since the last gap go back to seq, every
// seq between applied. Called with mu held.
func (ts *tableState) reaches(seq int64) bool {
	for _, p := range ts.recent {
		if p.token != "" && p.seq <= seq && p.seq >= ts.runFrom {
			return true
		}
	}
	return false
}

// behind reports whether r, read after b was seen, needs a verify: it moved past what the
// table has seen, or it is not on the sequence the table followed.
func (ts *tableState) behind(r record, b seen) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.resync {
		return true
	}
	if !r.exists {
		return ts.epoch != ""
	}
	if r.epoch != ts.epoch || r.seq > ts.seq || ts.diverged(r, b) {
		return true
	}
	ts.checks.drop(b.checks) // checked against this record: on the sequence, or beyond its ring
	return false
}

// verify settles the table against r, read at least a grace before (after b was seen):
// whatever is still missing was lost, and a record that went back in time lost the
// invalidations after its point.
func (ts *tableState) verify(r record, b seen) {
	flush, regressed := false, false
	ts.mu.Lock()
	switch {
	case ts.resync:
		ts.resync = false // flushed at the overflow already
		if r.exists {
			ts.adopt(r.epoch, r.seq, r.last)
		} else {
			ts.adopt("", 0, "")
		}
	case !r.exists:
		if ts.epoch != "" && ts.epoch == b.epoch {
			// The record vanished: data loss on the server (a FLUSHALL, a restart without
			// persistence), and the table's rows with it. Not a regression: a whole-table
			// invalidation would only delete the rows written since. (A restore from a
			// snapshot taken before the table's first write, when rows were filled but no
			// record existed, looks the same and brings those rows back: they stay until
			// their TTL.) A table that had seen no record when b was taken, or has seen a
			// newer epoch since, learned of the record after this read: nothing to settle.
			flush = true
			ts.adopt("", 0, "")
		}
	case r.epoch == ts.epoch:
		if ts.regressions.Load() != b.regressions {
			// A message saw a regression after b, flushed, and the table follows the new
			// sequence from it: the record is settled against where the table is now (writes
			// after that message may have been lost too).
			b = seen{epoch: ts.epoch, seq: ts.seq, last: ts.last, regressions: ts.regressions.Load()}
		}
		switch {
		case ts.diverged(r, b):
			ts.regressions.Add(1)
			flush, regressed = true, true
			ts.follow(r.seq, r.last)
			ts.learn(r, 0)
		case r.seq > ts.seq:
			// On the sequence, past messages that were lost or are late: a gap found by the
			// reconcile. The writes it moves past stay known, for their late messages.
			flush = true
			ts.checks.drop(b.checks)
			ts.learn(r, ts.seq)
			ts.skip(r.seq, r.last)
		default:
			// On the sequence, through every position b had to check: they are checked.
			ts.checks.drop(b.checks)
		}
	case ts.isRetired(r.epoch) && (r.epoch == b.epoch || !ts.leftBefore(r.epoch, b)):
		// The table already moved on past this record: it was read before a newer message
		// (of another epoch) reached the table. The record was read after b was seen, so
		// an epoch the table left only after b may simply be where the record was then.
	case ts.isRetired(r.epoch):
		// The record is back in an epoch the table had left before b was seen: it went back
		// to before a whole-table invalidation (a snapshot, or a replica that missed it), and
		// its rows with it. A regression; the epoch is followed again. (Back in an epoch left
		// only after b, it is told by the next reconcile, whose position comes after it.)
		ts.regressions.Add(1)
		flush, regressed = true, true
		ts.adopt(r.epoch, r.seq, r.last)
		ts.learn(r, 0)
	default:
		flush = true
		ts.adopt(r.epoch, r.seq, r.last)
	}
	ts.mu.Unlock()
	if regressed {
		ts.regressed()
	}
	if flush {
		ts.flush()
	}
}

// regressed reports a regression to the table's reconciler: the rows went back in time with
// the record, so a row that one of the lost invalidations had deleted is there again, older
// than the database behind it (a lost Set only loses a row). Flushing L1 alone would let the
// next read copy such a row back in, so the table owes a whole-table invalidation, which the
// reconcile it wakes sends at once.
func (ts *tableState) regressed() {
	if ts.onRegression != nil {
		ts.onRegression()
	}
}

// leftBefore reports whether the table had left epoch when b was seen. Called with mu held.
func (ts *tableState) leftBefore(epoch string, b seen) bool {
	n, ok := ts.retiredAt(epoch)
	return ok && n <= b.left
}
