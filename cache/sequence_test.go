package cache

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDivergedBusyTable: a record read before more than recentLen messages were applied (a
// busy table, a slow read of the records) is on the sequence, not a regression; one within
// the recent pairs is judged by its token.
func TestDivergedBusyTable(t *testing.T) {
	ts := &tableState{}
	tok := func(seq int64) string { return "t" + strconv.FormatInt(seq, 10) }
	ts.adopt("e", 1, tok(1))
	b := seen{epoch: "e", seq: 1, last: tok(1)}
	for seq := int64(2); seq <= 3*recentLen; seq++ {
		ts.applied(seq, tok(seq))
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	old := int64(recentLen) // applied, but no longer among the recent pairs
	require.False(t, ts.diverged(record{exists: true, epoch: "e", seq: old, last: tok(old)}, b))
	require.False(t, ts.diverged(record{exists: true, epoch: "e", seq: old, last: "other"}, b), "nothing to compare it with")
	recent := int64(3*recentLen - 10)
	require.False(t, ts.diverged(record{exists: true, epoch: "e", seq: recent, last: tok(recent)}, b))
	require.True(t, ts.diverged(record{exists: true, epoch: "e", seq: recent, last: "other"}, b), "another token at a recent seq")
	require.True(t, ts.diverged(record{exists: true, epoch: "e", seq: 1, last: tok(1) + "x"}, b), "b's seq with another token")
}

// TestDivergedChain: a record ahead of the point a reader saw, whose messages were all lost,
// is judged by its ring of recent tokens: on the sequence when the token at the seen seq is
// the one the reader applied, a regression when it is another (the record went back and new
// writes brought it past), and undecided (a gap, not a regression) beyond the chain's reach.
func TestDivergedChain(t *testing.T) {
	tok := func(gen string, seq int64) string { return fmt.Sprintf("%s%015d", gen, seq) }
	chain := func(gen string, from, to int64) string { // newest first: tokens of to down to from
		var s strings.Builder
		for seq := to; seq >= from; seq-- {
			s.WriteString(tok(gen, seq))
		}
		return s.String()
	}
	ts := &tableState{}
	ts.adopt("e", 51, tok("a", 51))
	b := seen{epoch: "e", seq: 51, last: tok("a", 51)}
	rec := func(seq int64, c string) record { // c: the tokens of seq and down, newest first, into the ring
		r := record{exists: true, epoch: "e", seq: seq, last: c[:tokenLen]}
		for i := 0; i < chainLen && (i+1)*tokenLen <= len(c); i++ {
			s := seq - int64(i)
			r.ring[((s%chainLen)+chainLen)%chainLen] = fmt.Sprintf("%d:%s", s, c[i*tokenLen:(i+1)*tokenLen])
		}
		return r
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	require.False(t, ts.diverged(rec(52, tok("a", 52)+chain("a", 1, 51)), b), "one write after the point seen")
	require.True(t, ts.diverged(rec(52, chain("b", 2, 52)), b), "rewritten from seq 2 after a restore")
	require.False(t, ts.diverged(rec(51+chainLen, chain("b", 52, 51+chainLen)), b), "the seen seq is past the chain's reach")
	require.True(t, ts.diverged(rec(51+chainLen-1, chain("b", 51, 51+chainLen-1)), b), "the chain's oldest token")
	require.False(t, ts.diverged(rec(60, tok("a", 60)), b), "a record whose chain holds one token")
	stale := rec(60, tok("a", 60))
	stale.ring[51] = "-13:" + tok("z", 13) // seq 51 was written by a writer that left the ring alone
	require.False(t, ts.diverged(stale, b), "a ring field that names another seq tells nothing")
}
