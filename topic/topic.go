package topic

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/keys"
)

// Defaults of [Config].
const (
	// DefaultMaxPayload is the largest payload, in bytes, that [Topics.Publish] sends.
	DefaultMaxPayload = 512 << 10
	// DefaultSubscribeBuffer is how many messages a subscription queues for its handler
	// before it drops messages and reports an [Overflow].
	DefaultSubscribeBuffer = 1024
)

// Config configures [Topics]. The zero Config is valid: every zero field means its default.
type Config struct {
	// MaxPayload is the largest payload in bytes; larger ones are refused before anything is
	// sent. Default 512 KiB ([DefaultMaxPayload]).
	MaxPayload int
	// SubscribeBuffer is how many messages a subscription queues for its handler before it
	// drops messages and reports an [Overflow]. Default 1024 ([DefaultSubscribeBuffer]).
	SubscribeBuffer int
	// DirectDelivery runs a subscription's handler on the goroutine that receives the
	// connection's messages from valkey-go, when no event waits before the message and the
	// handler is free, instead of on the subscription's own delivery goroutine: one goroutine
	// hand-off less per message, so messages reach the handler sooner. Events still reach the
	// handler one at a time and in order per connection. A message that arrives while the
	// handler runs on the delivery goroutine is queued as without the option; but while it
	// runs directly, that connection's next messages are not queued: they wait in valkey-go's
	// small buffer, then in the socket and the server's output buffer, so SubscribeBuffer and
	// [Overflow] do not apply to them, and a handler slow enough for the server's pub/sub
	// output limit has the connection dropped ([Disconnected], then a resubscribe). A
	// connection that drops while the handler runs on it is noticed, and resubscribed, only
	// once the handler returns. Set it only for a handler that returns at once and never
	// blocks. Default false.
	DirectDelivery bool

	stable time.Duration // resubscribeStable unless a test sets it (export_test.go)
	// beforeSubscribe, when a test sets it (export_test.go), runs in each connection attempt
	// between Drain's check and the SSUBSCRIBE.
	beforeSubscribe func()
}

// withDefaults fills the zero fields with their defaults.
func (c Config) withDefaults() Config {
	c.MaxPayload = cmp.Or(c.MaxPayload, DefaultMaxPayload)
	c.SubscribeBuffer = cmp.Or(c.SubscribeBuffer, DefaultSubscribeBuffer)
	c.stable = cmp.Or(c.stable, resubscribeStable)
	return c
}

// validate refuses what no default can mend, naming the field.
func (c Config) validate() error {
	if c.MaxPayload < 0 {
		return fmt.Errorf("%w: Config.MaxPayload is %d; it must not be negative", ErrInvalid, c.MaxPayload)
	}
	if c.SubscribeBuffer < 0 {
		return fmt.Errorf("%w: Config.SubscribeBuffer is %d; it must not be negative", ErrInvalid, c.SubscribeBuffer)
	}
	return nil
}

// Topics is sharded pub/sub over one valkey-go client: publish to topics, and subscribe to
// topics and to tables' invalidation channels. It holds no goroutines and needs no closing
// (each [Subscription] is closed on its own); it is safe for concurrent use. Topics are
// named by strings and need no declaration.
type Topics struct {
	client valkey.Client
	cfg    Config
}

// New returns Topics over client with cfg. Build the client with DisableCache: true unless it
// is also used for client-side caching; topics do not use it. A nil client or a negative
// Config field is refused with [ErrInvalid].
func New(client valkey.Client, cfg Config) (*Topics, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: topic.New: nil client", ErrInvalid)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Topics{client: client, cfg: cfg.withDefaults()}, nil
}

// Publish sends payload to every subscriber of topic name over sharded pub/sub (SPUBLISH on
// the topic channel's slot, see keys.TopicChannel) and returns how many subscribers of that
// shard received it. Delivery is at most once: a subscriber that is disconnected at that
// moment misses it (and is told so by its [Disconnected] and [Subscribed] events).
func (t *Topics) Publish(ctx context.Context, name string, payload []byte) (int64, error) {
	const op = "publish"
	ch, err := keys.TopicChannel(name)
	if err != nil {
		return 0, invalid(op, err)
	}
	if len(payload) > t.cfg.MaxPayload {
		return 0, fmt.Errorf("%w: %s on topic %s: %d bytes, the limit is %d", ErrTooLarge, op, name, len(payload), t.cfg.MaxPayload)
	}
	n, err := t.client.Do(ctx, t.client.B().Spublish().Channel(ch).Message(string(payload)).Build()).AsInt64()
	if err != nil {
		return 0, clientError(op+" on topic "+name, err)
	}
	return n, nil
}
