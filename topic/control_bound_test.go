package topic

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// queued is how many events q holds for its handler.
func (q *eventQueue) queued() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.events) - q.head
}

// drain pops every queued event without waiting.
func (q *eventQueue) drain(t *testing.T) []Event {
	t.Helper()
	var out []Event
	for q.queued() > 0 {
		e, ok := q.pop()
		require.True(t, ok)
		q.done() // the handler returns at once
		out = append(out, e)
	}
	return out
}

// flap pushes what hold pushes for one connection that drops and resubscribes: Disconnected,
// then Subscribed with the next count.
func flap(q *eventQueue, channels []string, count int) {
	q.push(Event{Kind: Disconnected, Channels: channels, Err: fmt.Errorf("drop %d", count)})
	q.push(Event{Kind: Subscribed, Channels: channels, Resubscribed: true, Count: count})
}

// TestControlEventsBounded: under a stalled handler and a flapping server, the control events
// of a connection do not pile up: the queue holds at most its latest Disconnected and
// Subscribed, and the handler still sees a resubscribe, with the latest Count, after every
// message queued before it. Before the fix every flap queued two events for ever.
func TestControlEventsBounded(t *testing.T) {
	t.Parallel()
	q := newEventQueue(8)
	chans := []string{"emq:{a}:topic"}
	q.push(Event{Kind: Subscribed, Channels: chans, Count: 1})
	first, ok := q.pop() // the handler takes the first Subscribed, then stalls
	require.True(t, ok)
	require.Equal(t, 1, first.Count)
	q.push(Event{Kind: Message, Payload: []byte("m")})
	const flaps = 10_000
	for i := range flaps {
		flap(q, chans, i+2)
	}
	require.LessOrEqual(t, q.queued(), 3, "one message and at most two control events")
	q.done() // the stalled handler returns

	got := q.drain(t)
	require.Len(t, got, 3)
	require.Equal(t, Message, got[0].Kind, "the message queued before the flaps comes first")
	last := got[len(got)-1]
	require.Equal(t, Subscribed, last.Kind)
	require.True(t, last.Resubscribed)
	require.Equal(t, flaps+1, last.Count, "Count says how many times the channels were subscribed")
	require.Equal(t, Disconnected, got[len(got)-2].Kind, "a Disconnected before the Subscribed")
	require.EqualError(t, got[len(got)-2].Err, fmt.Sprint("drop ", flaps+1), "the latest drop's error")

	// A flap whose Subscribed the handler already took: Disconnected alone is queued.
	q.push(Event{Kind: Disconnected, Channels: chans, Err: errors.New("down")})
	got = q.drain(t)
	require.Len(t, got, 1)
	require.Equal(t, Disconnected, got[0].Kind)
}

// TestControlEventsBoundedWithMessages: flaps of two connections interleaved with messages
// past the buffer (so Overflow events sit between the control events) stay bounded too, and
// the handler's view holds: per connection Disconnected and Subscribed alternate, the last
// Subscribed carries the last Count, and every message is delivered or counted in an
// Overflow.
func TestControlEventsBoundedWithMessages(t *testing.T) {
	t.Parallel()
	const limit, rounds = 4, 5_000
	q := newEventQueue(limit)
	conns := [][]string{{"emq:{a}:topic"}, {"emq:{b}:topic"}}
	for _, ch := range conns {
		q.push(Event{Kind: Subscribed, Channels: ch, Count: 1})
	}
	sent := 0
	bound := 2*(limit+2*len(conns)) + 1 // messages, 2 control events per connection, Overflows between
	for i := range rounds {
		for _, ch := range conns {
			q.push(Event{Kind: Message, Payload: []byte("x")})
			sent++
			flap(q, ch, i+2)
		}
		require.LessOrEqual(t, q.queued(), bound, "round %d", i)
	}

	got := q.drain(t)
	delivered := 0
	lastKind := map[string]EventKind{}
	lastCount := map[string]int{}
	for i, e := range got {
		switch e.Kind {
		case Message:
			delivered++
		case Overflow:
			delivered += e.Dropped
			if i > 0 {
				require.NotEqual(t, Overflow, got[i-1].Kind, "adjacent Overflows are merged")
			}
		case Subscribed, Disconnected:
			c := e.Channels[0]
			if k, ok := lastKind[c]; ok {
				require.NotEqual(t, k, e.Kind, "%s: Disconnected and Subscribed alternate", c)
			}
			lastKind[c] = e.Kind
			if e.Kind == Subscribed {
				require.Greater(t, e.Count, lastCount[c])
				lastCount[c] = e.Count
			}
		}
	}
	require.Equal(t, sent, delivered, "every message delivered or counted")
	for _, ch := range conns {
		require.Equal(t, Subscribed, lastKind[ch[0]])
		require.Equal(t, rounds+1, lastCount[ch[0]])
	}
}
