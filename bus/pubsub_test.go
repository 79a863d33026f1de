package bus_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/topic"
)

// The mechanism of pub/sub (resubscribe, overflow, cluster slots) is tested in package topic;
// these tests prove that the bus's verbs reach it and that its errors keep the bus's names.

// TestPublishSubscribe: a message published through the bus reaches a subscription made
// through the bus, as a bus.Event that is a topic.Event.
func TestPublishSubscribe(t *testing.T) {
	t.Parallel()
	valkeytest.OnTargets(t, func(t *testing.T, tg valkeytest.Target) {
		ctx, c, b, name, _ := setup(t, tg, bus.Config{})
		events := make(chan bus.Event, 16)
		sub, err := b.Subscribe(ctx, []string{name}, func(e bus.Event) { events <- e })
		require.NoError(t, err)
		defer sub.Close()
		var s *topic.Subscription = sub // the same type
		ch, err := keys.TopicChannel(name)
		require.NoError(t, err)
		require.Equal(t, []string{ch}, s.Channels())

		first := next(t, events)
		require.Equal(t, bus.Subscribed, first.Kind)
		require.Equal(t, topic.Subscribed, first.Kind)
		require.Equal(t, 1, first.Count)

		n, err := b.Publish(ctx, name, []byte("hello"))
		require.NoError(t, err)
		require.Equal(t, int64(1), n, "one subscriber")
		require.Equal(t, bus.Event{Kind: bus.Message, Channel: ch, Name: name, Payload: []byte("hello")}, next(t, events))

		// SubscribeChannels takes a table's invalidation channel, on which the cache publishes.
		table := keys.MustTable(name)
		inval := make(chan bus.Event, 16)
		sub2, err := b.SubscribeChannels(ctx, []string{table.Inval()}, func(e bus.Event) { inval <- e })
		require.NoError(t, err)
		defer sub2.Close()
		require.Equal(t, bus.Subscribed, next(t, inval).Kind)
		require.NoError(t, c.Do(ctx, c.B().Spublish().Channel(table.Inval()).Message("k1").Build()).Error())
		require.Equal(t, bus.Event{Kind: bus.Message, Channel: table.Inval(), Name: name, Payload: []byte("k1")}, next(t, inval))
	})
}

// TestPubSubErrors: the bus's pub/sub errors match the bus's sentinels and package topic's
// alike; the bus's Config reaches the topics (MaxPayload here).
func TestPubSubErrors(t *testing.T) {
	t.Parallel()
	valkeytest.OnTargets(t, func(t *testing.T, tg valkeytest.Target) {
		ctx, _, b, name, q := setup(t, tg, bus.Config{MaxPayload: 64})

		_, err := b.Publish(ctx, name, bytes.Repeat([]byte("x"), 65))
		require.ErrorIs(t, err, bus.ErrTooLarge)
		require.ErrorIs(t, err, topic.ErrTooLarge)
		require.NotErrorIs(t, err, bus.ErrInvalid)
		require.ErrorContains(t, err, "the limit is 64")

		_, err = b.Publish(ctx, "a:b", []byte("x"))
		require.ErrorIs(t, err, bus.ErrInvalid)
		require.ErrorIs(t, err, topic.ErrInvalid)
		require.ErrorIs(t, err, keys.ErrInvalid)
		require.NotErrorIs(t, err, bus.ErrTooLarge)

		_, err = b.Subscribe(ctx, []string{"a{b"}, func(bus.Event) {})
		require.ErrorIs(t, err, bus.ErrInvalid)
		require.ErrorIs(t, err, topic.ErrInvalid)
		require.ErrorIs(t, err, keys.ErrInvalid)

		_, err = b.SubscribeChannels(ctx, []string{q.Pending()}, func(bus.Event) {})
		require.ErrorIs(t, err, bus.ErrInvalid)
		require.ErrorIs(t, err, topic.ErrInvalid)
		require.ErrorContains(t, err, "not a topic or invalidation channel")

		_, err = b.Subscribe(ctx, []string{name}, nil)
		require.ErrorIs(t, err, bus.ErrInvalid)
		require.ErrorIs(t, err, topic.ErrInvalid)

		_, err = bus.New(tg.Client, bus.Config{SubscribeBuffer: -1})
		require.ErrorIs(t, err, bus.ErrInvalid)
	})
}

// next is the next event on ch.
func next(t *testing.T, ch <-chan bus.Event) bus.Event {
	t.Helper()
	select {
	case e := <-ch:
		return e
	case <-time.After(15 * time.Second):
		t.Fatal("timed out waiting for an event")
		return bus.Event{}
	}
}
