package topic

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestQueueReleasesPayloads: once the handler has taken every event, the queue's backing
// array holds no event, so no payload stays reachable from an idle subscription. Before the
// fix, the compaction pop does when the taken events fill more than half the array left a
// copy of every moved event behind it, and those copies kept their payloads (up to
// SubscribeBuffer of them, each up to MaxPayload) alive until later pushes overwrote them.
func TestQueueReleasesPayloads(t *testing.T) {
	t.Parallel()
	const n = 3000
	q := newEventQueue(n)
	for range n {
		q.push(Event{Kind: Message, Payload: make([]byte, 16)})
	}
	for range n {
		e, ok := q.pop()
		require.True(t, ok)
		q.done()
		require.Len(t, e.Payload, 16)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, e := range q.events[:cap(q.events)] {
		require.Nil(t, e.Payload, "slot %d of the drained queue still holds a payload", i)
	}
}
