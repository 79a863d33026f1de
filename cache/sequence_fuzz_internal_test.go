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
