package cache

import (
	"strconv"
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
