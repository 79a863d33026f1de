package topic

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/keys"
)

// Resubscribe backoff: the first retry after the drop of a connection that stayed subscribed
// for resubscribeStable is immediate; later ones, and every retry after a connection that
// dropped sooner, back off exponentially with jitter, so a flapping server (one that
// confirms the subscription and drops the connection right after) is not hammered.
const (
	resubscribeMin    = 50 * time.Millisecond
	resubscribeMax    = 5 * time.Second
	resubscribeStable = 100 * time.Millisecond
)

// EventKind says what an [Event] reports.
type EventKind uint8

// The kinds of events a subscription delivers.
const (
	// Message: a message arrived on Channel (Name is its topic or table), with Payload.
	Message EventKind = iota + 1
	// Subscribed: Channels are subscribed: after the first subscribe, and again after
	// resubscribes (Resubscribed true, Count > 1). Messages published while they were not
	// subscribed are lost: a cache flushes what those channels cover. Resubscribes that
	// happen while the handler has not yet received the previous ones are coalesced into
	// one, the latest (see the package doc).
	Subscribed
	// Disconnected: the connection carrying Channels dropped (Err says why); the subscription
	// resubscribes by itself and reports Subscribed when it has.
	Disconnected
	// Overflow: the handler fell behind and Dropped messages were discarded at this point of
	// the stream. Nothing is dropped silently: a cache flushes on it.
	Overflow
)

// String is the kind's name: message, subscribed, disconnected or overflow.
func (k EventKind) String() string {
	switch k {
	case Message:
		return "message"
	case Subscribed:
		return "subscribed"
	case Disconnected:
		return "disconnected"
	case Overflow:
		return "overflow"
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event is one delivery to a subscription's handler.
type Event struct {
	Kind EventKind
	// Channel and Payload: Message. Name is the name in the channel's hash tag: the topic of
	// a topic channel, the table of an invalidation channel.
	Channel string
	Name    string
	Payload []byte
	// Channels: Subscribed and Disconnected: the channels of the connection concerned (on a
	// cluster, one connection per slot; otherwise all of the subscription's channels).
	Channels []string
	// Resubscribed and Count: Subscribed. Count is how many times Channels were subscribed,
	// 1 for the first time; Resubscribed is Count > 1.
	Resubscribed bool
	Count        int
	// Dropped: Overflow: how many messages were discarded.
	Dropped int
	// Err: Disconnected: why the connection ended.
	Err error
}

// Subscription is a live subscription made by [Topics.Subscribe] or
// [Topics.SubscribeChannels].
// Its handler runs on one goroutine of its own, never on valkey-go's reader goroutine (with
// [Config].DirectDelivery, sometimes on the goroutine that receives a connection's messages),
// one event at a time, in order per connection.
type Subscription struct {
	client   valkey.Client
	channels []string
	handle   func(Event)
	queue    *eventQueue
	stable   time.Duration // how long a connection stays up before its drop is retried at once
	direct   bool          // Config.DirectDelivery
	before   func()        // Config.beforeSubscribe (tests)

	ctx    context.Context // lives until Close
	cancel context.CancelFunc
	// draining is closed by Drain: the connections end once unsubscribed, and do not
	// subscribe again.
	draining  chan struct{}
	drainOnce sync.Once
	dcMu      sync.Mutex
	dcs       map[valkey.DedicatedClient][]string // each live connection's channels, for Drain
	conns     sync.WaitGroup                      // one goroutine per connection
	loop      sync.WaitGroup                      // the handler goroutine
	once      sync.Once
}

// Subscribe subscribes to topics by name (as given to [Topics.Publish]); see
// [Topics.SubscribeChannels].
func (t *Topics) Subscribe(ctx context.Context, names []string, handle func(Event)) (*Subscription, error) {
	channels := make([]string, len(names))
	for i, name := range names {
		ch, err := keys.TopicChannel(name)
		if err != nil {
			return nil, invalid("subscribe", err)
		}
		channels[i] = ch
	}
	return t.SubscribeChannels(ctx, channels, handle)
}

// SubscribeChannels subscribes to shard channels: each must be a channel of the grammar (a
// topic channel, see keys.TopicChannel, or a table's invalidation channel, see
// keys.Table.Inval). On a cluster it holds one connection per slot, elsewhere one in all; it
// resubscribes by itself after a drop, with backoff, until [Subscription.Close]. Events are
// queued for handle up to [Config.SubscribeBuffer] messages; past that, messages are dropped
// and counted in an [Overflow] event. A connection's Disconnected and Subscribed events that
// handle has not yet received are coalesced into its latest two (see the package doc).
//
// It returns once the server confirmed every channel, with the first Subscribed event(s)
// queued for handle: a message published after it returns is delivered. When the first
// attempt fails it returns the error and leaves nothing running. ctx bounds only that wait
// (but for a connection being dialled to a server that accepts it and does not answer,
// which the client gives up after its dial timeout); the subscription lives until Close. handle must not call Close (Close waits for it).
func (t *Topics) SubscribeChannels(ctx context.Context, channels []string, handle func(Event)) (*Subscription, error) {
	const op = "subscribe"
	if len(channels) == 0 {
		return nil, fmt.Errorf("%w: %s: no channels", ErrInvalid, op)
	}
	if handle == nil {
		return nil, fmt.Errorf("%w: %s: nil handler", ErrInvalid, op)
	}
	channels = slices.Clone(channels)
	slices.Sort(channels)
	channels = slices.Compact(channels)
	for _, ch := range channels {
		k, err := keys.Parse(ch)
		if err != nil {
			return nil, invalid(op, err)
		}
		if k.Type != keys.Topic && k.Type != keys.Inval && k.Type != keys.ShardInval {
			return nil, invalid(op, fmt.Errorf("%w: %q is a %s key, not a topic or invalidation channel (of a table or of a table's shard)", keys.ErrInvalid, ch, k.Type))
		}
	}
	var groups [][]string
	if t.client.Mode() == valkey.ClientModeCluster {
		bySlot := map[uint16][]string{}
		for _, ch := range channels {
			bySlot[keys.Slot(ch)] = append(bySlot[keys.Slot(ch)], ch)
		}
		for _, g := range bySlot {
			groups = append(groups, g)
		}
		slices.SortFunc(groups, func(a, b []string) int { return cmp.Compare(a[0], b[0]) })
	} else {
		groups = [][]string{channels}
	}

	s := &Subscription{client: t.client, channels: channels, handle: handle, queue: newEventQueue(t.cfg.SubscribeBuffer), stable: t.cfg.stable, direct: t.cfg.DirectDelivery,
		before: t.cfg.beforeSubscribe, draining: make(chan struct{}), dcs: map[valkey.DedicatedClient][]string{}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.loop.Add(1)
	go s.deliver()
	ready := make([]chan error, len(groups))
	for i, g := range groups {
		ready[i] = make(chan error, 1)
		s.conns.Add(1)
		go s.hold(g, ready[i])
	}
	for _, r := range ready {
		select {
		case err := <-r:
			if err != nil {
				s.Close()
				return nil, clientError(op, err)
			}
		case <-ctx.Done():
			s.Close()
			return nil, clientError(op, ctx.Err())
		}
	}
	return s, nil
}

// Channels returns the subscribed channels, sorted.
func (s *Subscription) Channels() []string { return slices.Clone(s.channels) }

// Close ends the subscription: it unsubscribes, releases the connections, and returns when
// the subscription's goroutines have ended and the handler has returned. Events not yet
// delivered are discarded. It is safe to call more than once, but not from the handler.
func (s *Subscription) Close() {
	s.once.Do(func() {
		s.cancel()
		s.conns.Wait()
		s.queue.close()
		s.loop.Wait()
	})
}

// Drain ends the subscription as Close does, but first has each connection unsubscribe, and
// delivers every event that arrived before the server confirmed it, the queued ones included:
// a message published before Drain was called is handled before Drain returns. When ctx ends
// first, what is left is dropped, as by Close. Not from the handler.
func (s *Subscription) Drain(ctx context.Context) {
	s.once.Do(func() {
		s.drainOnce.Do(func() { close(s.draining) })
		s.dcMu.Lock()
		for dc, chans := range s.dcs {
			dc.Do(ctx, dc.B().Sunsubscribe().Channel(chans...).Build()) // its Receive then returns
		}
		s.dcMu.Unlock()
		ended := make(chan struct{})
		go func() {
			s.conns.Wait()
			close(ended)
		}()
		select {
		case <-ended:
			s.queue.end()
		case <-ctx.Done():
			s.cancel()
			<-ended
			s.queue.close()
		}
		s.cancel()
		// The events queued before the unsubscribe are delivered, within ctx: past it, the
		// rest is dropped (the handler's call in progress finishes).
		delivered := make(chan struct{})
		go func() {
			s.loop.Wait()
			close(delivered)
		}()
		select {
		case <-delivered:
		case <-ctx.Done():
			s.queue.close()
			<-delivered
		}
		s.queue.close()
	})
}

// deliver runs the handler, one event at a time, until Close.
func (s *Subscription) deliver() {
	defer s.loop.Done()
	for {
		e, ok := s.queue.pop()
		if !ok {
			return
		}
		s.handle(e)
		s.queue.done()
	}
}

// message delivers a message that arrived on a connection. valkey-go calls it on the goroutine
// that called Receive (hold's): it runs the handler there at once when delivery is direct and
// nothing waits before the message, else it queues the message for deliver.
func (s *Subscription) message(m valkey.PubSubMessage) {
	e := Event{Kind: Message, Channel: m.Channel, Name: hashTag(m.Channel), Payload: []byte(m.Message)}
	if s.direct && s.queue.takeIdle() {
		defer s.queue.doneDirect() // deferred: a handler that ends its goroutine still frees it
		s.handle(e)
		return
	}
	s.queue.push(e)
}

// receive subscribes channels on a dedicated connection and runs until it ends; the
// connection goes back to the client however receive returns.
func (s *Subscription) receive(channels []string, hook func(valkey.PubSubSubscription)) (err error) {
	dc, release := s.client.Dedicate()
	defer func() {
		if err != nil || s.ctx.Err() != nil {
			// Ended by Close, or by a failed connection: closed rather than handed back, since
			// handing back a subscribed connection unsubscribes it first, a round trip that
			// waits on a server that stopped answering until the client gives the connection
			// up (12 s: Close, Drain and a failed Subscribe took that long). Closing the
			// socket ends the server's subscription as well.
			dc.Close()
		}
		release()
	}()
	s.dcMu.Lock()
	s.dcs[dc] = channels
	s.dcMu.Unlock()
	defer func() {
		s.dcMu.Lock()
		delete(s.dcs, dc)
		s.dcMu.Unlock()
	}()
	select {
	case <-s.draining: // Drain came first: do not subscribe
		return nil
	default:
	}
	if s.before != nil {
		s.before()
	}
	// Drain may begin between the check above and the SSUBSCRIBE: its SUNSUBSCRIBE then
	// reaches the server first and does nothing, and the connection would stay subscribed.
	// So once every channel is confirmed, a connection that finds Drain begun unsubscribes
	// itself: its SUNSUBSCRIBE follows the SSUBSCRIBE. From another goroutine, since the hook
	// runs on the connection's reader; under dcMu, as Drain's, so the connection is not
	// released while it is sent.
	confirmed := 0
	unsubscribe := func(ps valkey.PubSubSubscription) {
		hook(ps)
		if ps.Kind != "ssubscribe" {
			return
		}
		if confirmed++; confirmed != len(channels) {
			return
		}
		select {
		case <-s.draining:
			go func() {
				s.dcMu.Lock()
				defer s.dcMu.Unlock()
				if _, live := s.dcs[dc]; live {
					ctx, cancel := context.WithTimeout(context.Background(), drainUnsubscribeTimeout)
					defer cancel()
					dc.Do(ctx, dc.B().Sunsubscribe().Channel(channels...).Build())
				}
			}()
		default:
		}
	}
	return dc.Receive(valkey.WithOnSubscriptionHook(s.ctx, unsubscribe), dc.B().Ssubscribe().Channel(channels...).Build(), s.message)
}

// drainUnsubscribeTimeout bounds the SUNSUBSCRIBE a connection subscribed during Drain sends
// itself; Drain's context bounds the wait for it.
const drainUnsubscribeTimeout = 5 * time.Second

// hold keeps one connection's channels subscribed until Close. ready receives the first
// attempt's outcome: nil once every channel is confirmed, else the error that ended it.
func (s *Subscription) hold(channels []string, ready chan<- error) {
	defer s.conns.Done()
	var (
		mu        sync.Mutex
		count     int       // successful subscriptions so far
		confirmed int       // confirmations on the current connection
		up        bool      // the current connection is subscribed
		upAt      time.Time // when it was
	)
	// failures counts, since the last drop of a stable connection, the attempts that did not
	// subscribe or whose connection did not stay up for resubscribeStable: the backoff grows
	// with it.
	failures := 0
	for {
		mu.Lock()
		confirmed, up = 0, false
		mu.Unlock()
		// The hook runs on valkey-go's reader goroutine: it only counts and queues.
		hook := func(ps valkey.PubSubSubscription) {
			if ps.Kind != "ssubscribe" {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			confirmed++
			if confirmed != len(channels) {
				return
			}
			up, upAt = true, time.Now()
			count++
			s.queue.push(Event{Kind: Subscribed, Channels: slices.Clone(channels), Resubscribed: count > 1, Count: count})
			if count == 1 {
				ready <- nil
			}
		}
		err := s.receive(channels, hook)
		select {
		case <-s.draining:
			// Drain's SUNSUBSCRIBE ends Receive without an error; a connection that dropped
			// while Drain began may have lost a message published before it, which must not
			// go unreported (the push comes before conns.Done, so Drain delivers it).
			mu.Lock()
			wasUp := up
			mu.Unlock()
			if err != nil && wasUp && s.ctx.Err() == nil {
				s.queue.push(Event{Kind: Disconnected, Channels: slices.Clone(channels), Err: err})
			}
			return
		default:
		}
		if s.ctx.Err() != nil {
			return
		}
		if err == nil {
			err = errUnsubscribed
		}
		mu.Lock()
		wasUp, everUp, stable := up, count > 0, up && time.Since(upAt) >= s.stable
		up = false
		mu.Unlock()
		if !everUp {
			ready <- err // the first attempt failed: SubscribeChannels reports it and closes
			return
		}
		if wasUp {
			s.queue.push(Event{Kind: Disconnected, Channels: slices.Clone(channels), Err: err})
		}
		if stable {
			failures = 0 // the first retry after the drop of a stable connection is immediate
		} else {
			failures++ // a failed attempt, or a connection that flapped: back off further
		}
		if failures > 0 {
			backoff := min(resubscribeMin<<min(failures-1, 10), resubscribeMax)
			select {
			case <-s.ctx.Done():
				return
			case <-s.draining:
				return
			case <-time.After(backoff/2 + rand.N(backoff/2+1)):
			}
		}
	}
}

// hashTag is the name inside a channel's braces.
func hashTag(ch string) string {
	k, err := keys.Parse(ch)
	if err != nil {
		return ""
	}
	return k.Name
}
