package bus

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
)

// TestScriptKeysMatchHeaders: the KEYS the Go side passes are, in order, the KEYS each
// script's header declares; and every script of the bundle whose first key is a queue key is
// one the bus knows.
func TestScriptKeysMatchHeaders(t *testing.T) {
	t.Parallel()
	queueTypes := map[keys.Type]bool{keys.Pending: true, keys.Active: true, keys.Schedule: true, keys.Dead: true, keys.Meta: true, keys.Wake: true}
	for _, s := range lua.All() {
		var declared []keys.Type
		for _, p := range s.Header.Keys {
			k, err := keys.Parse(strings.NewReplacer("<q>", "orders", "<table>", "users", "<id>", "1", "<name>", "eod").Replace(p.Name))
			require.NoError(t, err, "%s: %s", s.Name, p.Name)
			declared = append(declared, k.Type)
		}
		if len(declared) == 0 || !queueTypes[declared[0]] {
			continue // not a queue script (the cache's scripts live here too)
		}
		want, ok := scriptKeys[s]
		require.True(t, ok, "%s is a queue script the bus does not know", s.Name)
		require.Equal(t, want, declared, s.Name)
	}
	require.Len(t, scriptKeys, 18)
}

// TestEventQueue: the queue between valkey-go and the handler keeps order, bounds messages
// (not control events), and turns every drop into an Overflow at the point of loss.
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
