// Package topic is sharded pub/sub over Valkey: broadcast topics, and the tables'
// invalidation channels that EchoCache's scripts publish on. It owns publishing, subscribing,
// the events a subscription delivers and resubscribing after a drop, so that package cache
// depends on topics and not on the job queue of package bus. (A bus.Bus offers the same
// verbs by delegating to [Topics] it holds.)
//
// A topic is named by a string of the key grammar (1 to 64 bytes of [A-Za-z0-9_.-]); its
// channel is emq:{<topic>}:topic (keys.TopicChannel), so a topic lives on one cluster slot.
// [Topics.Publish] sends with SPUBLISH on that slot; [Topics.Subscribe] subscribes topics by
// name and [Topics.SubscribeChannels] subscribes channels of the grammar, topic channels and
// tables' invalidation channels (keys.Table.Inval) alike. On a cluster a [Subscription] holds
// one connection per slot, elsewhere one in all.
//
// Delivery is at most once: a message published while a subscriber is disconnected is lost,
// and the subscriber is told, because a cache must then flush what those channels cover. A
// subscription delivers [Event]s to its handler on a goroutine of its own, never on
// valkey-go's reader (unless [Config].DirectDelivery lets a message that finds nothing queued
// and the handler free run it on the goroutine that receives its connection's messages), one
// at a time and in order per connection:
//
//   - [Message]: a message arrived (Channel, Name, Payload);
//   - [Subscribed]: after the first subscribe, and after resubscribes (Resubscribed,
//     Count; coalesced when the handler is behind, see below);
//   - [Disconnected]: a connection dropped (Err); the subscription resubscribes by itself
//     until [Subscription.Close]: at once after the drop of a connection that had stayed
//     subscribed for 100 ms, else with exponential backoff and jitter (up to 5 s), so a
//     server that drops every connection right after confirming it is not hammered;
//   - [Overflow]: the handler fell behind [Config.SubscribeBuffer] messages and Dropped
//     messages were discarded at this point of the stream. Nothing is dropped silently.
//
// What a subscription queues for a handler that falls behind is bounded: at most
// [Config.SubscribeBuffer] messages, and at most two control events per connection, its
// latest Disconnected and Subscribed. When a connection flaps while its handler is busy, the
// Disconnected and Subscribed events it has not yet received are coalesced: they are
// replaced by the latest ones, queued after every message that arrived before them, with
// the latest Err and Count (so Count may jump by more than one, and a first Subscribed still
// queued may arrive as a Subscribed with Resubscribed set). What a handler relies on holds:
// per connection it sees Disconnected and Subscribed alternate; every Subscribed comes after
// every message that arrived before that resubscribe; and a resubscribe it is not told of was
// followed by another drop, so a Disconnected comes, and a Subscribed with Resubscribed set
// once the connection is back (resyncing on that one covers the messages of every drop).
//
// [Subscription.Close] ends a subscription at once, dropping what it has not delivered;
// [Subscription.Drain] has each connection unsubscribe and delivers everything that arrived
// before the server confirmed it (bounded by its context), so a message published before the
// call reaches the handler.
//
// # One complete flow
//
//	client, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{"127.0.0.1:6379"}, DisableCache: true})
//	tp, err := topic.New(client, topic.Config{}) // MaxPayload 512 KiB, SubscribeBuffer 1024
//
//	sub, err := tp.Subscribe(ctx, []string{"prices"}, func(e topic.Event) {
//		switch e.Kind {
//		case topic.Message:
//			apply(e.Name, e.Payload) // e.Name is "prices"
//		case topic.Subscribed:
//			if e.Resubscribed {
//				resync() // messages published while it was down are lost
//			}
//		case topic.Overflow:
//			resync() // e.Dropped messages were discarded here
//		case topic.Disconnected:
//			log.Print(e.Err) // it resubscribes by itself
//		}
//	})
//	if err != nil { ... } // errors.Is(err, topic.ErrInvalid) for a bad name
//	defer sub.Close()
//
//	// Subscribe returned once the server confirmed every channel: this message is delivered.
//	n, err := tp.Publish(ctx, "prices", []byte("EURUSD 1.08")) // n: subscribers reached
//	_, err = tp.Publish(ctx, "prices", huge) // errors.Is(err, topic.ErrTooLarge)
//
// # Errors
//
// [ErrInvalid] for a bad name, channel, handler or [Config] (names and channels also match
// keys.ErrInvalid); [ErrTooLarge] for a payload past [Config.MaxPayload]. Errors of the
// client and of the caller's context are wrapped with the operation and stay reachable with
// errors.Is and errors.As.
package topic
