package cache

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPendingInvalsResume: the bookkeeping of an owed whole-table invalidation that stopped
// part way. While it is owed from the start, it covers any id; once its walk got somewhere,
// ids whose writes fail are kept beside it (the walk may have passed their rows), up to max,
// past which it is owed from the start again. A whole-table invalidation owed from the start
// while a retry was under way is not narrowed by that retry's resume. count reports what a
// retry took until it settles.
func TestPendingInvalsResume(t *testing.T) {
	t.Parallel()
	p := &pendingInvals{max: 3}
	p.addAll()
	p.add("a")
	require.Equal(t, -1, p.count())
	ids, all, from := p.take()
	require.Empty(t, ids, "owed from the start: it covers a")
	require.True(t, all)
	require.True(t, from.start())
	require.Equal(t, -1, p.count(), "taken, not settled: still owed")

	mid := flushPos{shard: 1, walk: walkPos{cursor: "96", server: "a"}}
	p.resume(mid, nil)
	p.settle()
	p.add("b", "c")
	require.Equal(t, -1, p.count())
	ids, all, from = p.take()
	require.ElementsMatch(t, []string{"b", "c"}, ids, "the walk got somewhere: b and c are kept")
	require.True(t, all)
	require.Equal(t, mid, from)

	p.addAll() // a record gone back in time, while the retry is under way
	p.resume(flushPos{shard: 1, walk: walkPos{cursor: "200", server: "a"}}, ids)
	p.settle()
	ids, all, from = p.take()
	require.True(t, all)
	require.True(t, from.start(), "owed from the start meanwhile: the retry's resume does not narrow it")
	require.Empty(t, ids)
	p.settle()
	require.Zero(t, p.count())

	p.resume(mid, []string{"x", "y", "z", "w"})
	_, all, from = p.take()
	require.True(t, all)
	require.True(t, from.start(), "past max ids: owed from the start again")
	p.settle()

	g := p.generation() // an InvalidateAll begins
	p.add("q")          // a write fails while it runs
	p.dropAt(g)
	require.Equal(t, 1, p.count(), "owed while the InvalidateAll ran: kept")
	g = p.generation()
	p.dropAt(g)
	require.Zero(t, p.count())
}
