package cache

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// seqTable is a synced table state at (E, seq n) whose tokens are t1..tn, and the counter
// of regressions reported to it (whole-table invalidations owed).
func seqTable(n int64) (*tableState, *seqCore, *int) {
	core := &seqCore{}
	owed := new(int)
	ts := &tableState{name: "t", core: core, own: "own", onRegression: func() { *owed++ }}
	ts.synced.Store(true)
	ts.mu.Lock()
	ts.adopt("E", n, "t"+strconv.FormatInt(n, 10))
	ts.mu.Unlock()
	return ts, core, owed
}

// ringRecord is the record at seq n whose ring holds tok(s) for s in (n-63, n].
func ringRecord(n int64, tok func(s int64) string) record {
	r := record{exists: true, epoch: "E", seq: n, last: tok(n)}
	for q := max(n-chainLen+1, 1); q <= n; q++ {
		r.ring[q%chainLen] = strconv.FormatInt(q, 10) + ":" + tok(q)
	}
	return r
}

func seqMsg(seq int64, prev, token string) inval {
	return inval{epoch: "E", seq: seq, prev: prev, token: token, ids: []string{token}}
}

// TestRollbackBelowAppliedSinceSeen: a table at 10 takes its position for a reconcile (b),
// then applies the messages of writes 11 and 12. The record then goes back to 11 (a lagging
// replica promoted: write 12 is lost, and the row it invalidated is back) and three new
// writes (12', 13', 14') whose messages are lost bring it to 14, which the reconcile reads.
// b is on the record's ring, but the table's own position since (12, t12) is not (the ring
// names t12' there): a regression, reported, not taken for a plain gap.
func TestRollbackBelowAppliedSinceSeen(t *testing.T) {
	ts, core, owed := seqTable(10)
	b := ts.seen()
	ts.onMessage(seqMsg(11, "t10", "t11"))
	ts.onMessage(seqMsg(12, "t11", "t12"))
	require.Zero(t, core.flushes)
	r := ringRecord(14, func(s int64) string {
		if s >= 12 {
			return "t" + strconv.FormatInt(s, 10) + "x" // the writes after the rollback
		}
		return "t" + strconv.FormatInt(s, 10)
	})
	require.True(t, ts.behind(r, b))
	ts.verify(r, b)
	require.Positive(t, core.flushes, "flushed at least")
	require.Equal(t, 1, *owed, "the record went back below write 12 (t12) that the table applied: a regression must be reported")
}

// TestLateMessagesAfterVerify: nothing goes back in time. A table at 10; the messages of
// writes 11, 12 and 13 are slower than the reconcile's grace (a busy subscriber), so verify
// flushes and moves the table to 13. When they come, they are duplicates of writes the
// record's ring named, not a regression (which would cost a whole-table invalidation).
func TestLateMessagesAfterVerify(t *testing.T) {
	ts, _, owed := seqTable(10)
	b := ts.seen()
	tok := func(s int64) string { return "t" + strconv.FormatInt(s, 10) }
	r := ringRecord(13, tok)
	require.True(t, ts.behind(r, b))
	ts.verify(r, b) // after the grace, the messages not there yet
	for s := int64(11); s <= 13; s++ {
		ts.onMessage(seqMsg(s, tok(s-1), tok(s)))
	}
	require.Zero(t, *owed, "the record never went back: no regression (a whole-table invalidation) may be reported")
	require.Zero(t, ts.regressions.Load())
}

// TestRollbackToRetiredEpoch: the record goes back to an epoch the table had left (a snapshot
// from before an InvalidateAll). Its messages look like late ones of that epoch, so the
// reconcile tells: it reads a record in the old epoch after the table had seen the new one,
// reports a regression and follows the old epoch again, whose later gaps are caught as usual.
func TestRollbackToRetiredEpoch(t *testing.T) {
	ts, core, owed := seqTable(5)                                    // epoch E, seq 5
	ts.onMessage(inval{epoch: "F", seq: 6, prev: "t5", token: "f6"}) // InvalidateAll: new epoch F
	require.Equal(t, 1, core.flushes)
	// Restored to E at 5; writes 6..9 in E, the message of 7 lost.
	tok := func(s int64) string { return "t" + strconv.FormatInt(s, 10) }
	ts.onMessage(seqMsg(6, "t5", "t6"))
	ts.onMessage(seqMsg(8, "t7", "t8")) // 7 lost: a gap in E
	ts.onMessage(seqMsg(9, "t8", "t9"))
	for range 3 { // three reconciles read E at 9
		b := ts.seen()
		r := ringRecord(9, tok)
		if ts.behind(r, b) {
			ts.verify(r, b)
		}
	}
	require.Greater(t, core.flushes, 1, "the lost message of write 7 (and the rollback) must flush the table")
	require.Positive(t, *owed, "the record went back to before a whole-table invalidation: its rows came back")
}

// TestEpochLeftAfterSeenIsNoRegression: a reconcile takes its position (b) in epoch E, then
// reads the record in epoch F, made by a whole-table invalidation whose message has not
// arrived yet; before the verify, the table applies F's message and then G's (another
// process's whole-table invalidation). F was left after b, so the read is simply older than
// the table's position: not a regression. (Reported as one, it made two processes that each
// owed a whole-table invalidation trade them for seconds: each new epoch made the other's
// reconcile read a retired one.) An epoch left before b is still a regression
// (TestRollbackToRetiredEpoch).
func TestEpochLeftAfterSeenIsNoRegression(t *testing.T) {
	ts, core, owed := seqTable(5)
	b := ts.seen()
	r := record{exists: true, epoch: "F", seq: 6, last: "f6"}
	ts.onMessage(inval{epoch: "F", seq: 6, prev: "t5", token: "f6"})
	ts.onMessage(inval{epoch: "G", seq: 7, prev: "f6", token: "g7"})
	flushes := core.flushes
	require.True(t, ts.behind(r, b))
	ts.verify(r, b)
	require.Zero(t, *owed, "F was left after the reconcile took its position: no regression")
	require.Equal(t, flushes, core.flushes, "nothing to flush: the table is past the record")
	require.Equal(t, "G", ts.seen().epoch)
}
