package bus

import (
	"context"
	"errors"

	"github.com/echocache/echocache/topic"
)

// The bus's broadcast topics are package topic's: these names keep the bus's API whole, and
// a value of one is a value of the other.
type (
	// Event is one delivery to a subscription's handler: [topic.Event].
	Event = topic.Event
	// EventKind says what an [Event] reports: [topic.EventKind].
	EventKind = topic.EventKind
	// Subscription is a live subscription made by [Bus.Subscribe] or
	// [Bus.SubscribeChannels]: [topic.Subscription].
	Subscription = topic.Subscription
)

// The kinds of events a subscription delivers; see package topic for each one's meaning.
const (
	// Message: a message arrived ([topic.Message]).
	Message = topic.Message
	// Subscribed: channels are subscribed, for the first time or again ([topic.Subscribed]).
	Subscribed = topic.Subscribed
	// Disconnected: a connection dropped; the subscription resubscribes by itself
	// ([topic.Disconnected]).
	Disconnected = topic.Disconnected
	// Overflow: the handler fell behind and messages were dropped ([topic.Overflow]).
	Overflow = topic.Overflow
)

// Publish sends payload to every subscriber of topic over sharded pub/sub and returns how
// many subscribers of that shard received it; see [topic.Topics.Publish]. Payloads past
// [Config.MaxPayload] are refused with [ErrTooLarge].
func (b *Bus) Publish(ctx context.Context, topic string, payload []byte) (int64, error) {
	n, err := b.topics.Publish(ctx, topic, payload)
	return n, fromTopic(err)
}

// Subscribe subscribes to topics (names, as given to [Bus.Publish]); see
// [topic.Topics.Subscribe].
func (b *Bus) Subscribe(ctx context.Context, topics []string, handle func(Event)) (*Subscription, error) {
	sub, err := b.topics.Subscribe(ctx, topics, handle)
	return sub, fromTopic(err)
}

// SubscribeChannels subscribes to shard channels: topic channels and tables' invalidation
// channels; see [topic.Topics.SubscribeChannels]. The subscription queues up to
// [Config.SubscribeBuffer] messages for handle before it reports an [Overflow].
func (b *Bus) SubscribeChannels(ctx context.Context, channels []string, handle func(Event)) (*Subscription, error) {
	sub, err := b.topics.SubscribeChannels(ctx, channels, handle)
	return sub, fromTopic(err)
}

// topicError is an error of package topic as the bus returns it: it matches the bus's
// sentinel of the same meaning too, so callers of the bus keep branching on [ErrInvalid] and
// [ErrTooLarge], and the topic error (and keys.ErrInvalid) stays reachable.
type topicError struct{ err error }

func (e *topicError) Error() string { return "bus: " + e.err.Error() }

func (e *topicError) Unwrap() error { return e.err }

func (e *topicError) Is(target error) bool {
	switch target {
	case ErrInvalid:
		return errors.Is(e.err, topic.ErrInvalid)
	case ErrTooLarge:
		return errors.Is(e.err, topic.ErrTooLarge)
	}
	return false
}

// fromTopic is the bus's face of an error of package topic.
func fromTopic(err error) error {
	if err == nil {
		return nil
	}
	return &topicError{err: err}
}
