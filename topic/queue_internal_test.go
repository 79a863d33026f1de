package topic

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestEventQueue: the queue between valkey-go and the handler keeps order, bounds messages
// (control events: TestControlEventsBounded), and turns every drop into an Overflow at the
// point of loss.
func TestEventQueue(t *testing.T) {
	t.Parallel()
	q := newEventQueue(2)
	msg := func(p string) Event { return Event{Kind: Message, Payload: []byte(p)} }
	q.push(Event{Kind: Subscribed, Count: 1})
	q.push(msg("a"))
	q.push(msg("b"))
	q.push(msg("c")) // dropped
	q.push(msg("d")) // dropped
	q.push(Event{Kind: Disconnected})
	var got []string
	pop := func() {
		e, ok := q.pop()
		require.True(t, ok)
		switch e.Kind {
		case Message:
			got = append(got, string(e.Payload))
		case Overflow:
			got = append(got, "overflow:"+string(rune('0'+e.Dropped)))
		default:
			got = append(got, e.Kind.String())
		}
	}
	for range 3 {
		pop()
	}
	q.push(msg("e")) // room again: queued after the overflow
	for range 3 {
		pop()
	}
	require.Equal(t, []string{"subscribed", "a", "b", "overflow:2", "disconnected", "e"}, got)

	done := make(chan bool)
	go func() {
		_, ok := q.pop()
		done <- ok
	}()
	q.close()
	select {
	case ok := <-done:
		require.False(t, ok, "pop ends when the queue closes")
	case <-time.After(10 * time.Second):
		t.Fatal("pop did not return on close")
	}
	q.push(msg("f")) // after close: ignored, no panic
}
