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
		q.done()
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

// TestQueueDirect: a handler run on a reader (takeIdle) is allowed only when nothing is
// queued and the handler is free; while it runs, pop hands out nothing; close waits for it.
func TestQueueDirect(t *testing.T) {
	t.Parallel()
	q := newEventQueue(8)
	msg := func(p string) Event { return Event{Kind: Message, Payload: []byte(p)} }
	require.True(t, q.takeIdle(), "empty and free")
	require.False(t, q.takeIdle(), "the handler is running")
	q.push(msg("a")) // arrives on another connection meanwhile
	popped := make(chan Event, 1)
	go func() {
		e, _ := q.pop()
		popped <- e
	}()
	select {
	case <-popped:
		t.Fatal("pop handed out an event while the handler ran on a reader")
	case <-time.After(50 * time.Millisecond):
	}
	q.doneDirect()
	select {
	case e := <-popped:
		require.Equal(t, "a", string(e.Payload))
	case <-time.After(10 * time.Second):
		t.Fatal("pop did not hand out the queued event once the handler returned")
	}
	require.False(t, q.takeIdle(), "the delivery goroutine holds the handler")
	q.done()
	q.push(msg("b"))
	require.False(t, q.takeIdle(), "b is queued: it goes first")
	e, ok := q.pop()
	require.True(t, ok)
	require.Equal(t, "b", string(e.Payload))
	q.done()

	require.True(t, q.takeIdle())
	closed := make(chan struct{})
	go func() {
		q.close()
		close(closed)
	}()
	select {
	case <-closed:
		t.Fatal("close returned while a handler ran on a reader")
	case <-time.After(50 * time.Millisecond):
	}
	q.doneDirect()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("close did not return once the handler did")
	}
	require.False(t, q.takeIdle(), "closed")
}
