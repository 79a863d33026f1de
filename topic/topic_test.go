package topic_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/topic"
)

// recorder collects a subscription's events for a test.
type recorder struct {
	mu     sync.Mutex
	events []topic.Event
	added  chan struct{}
}

func newRecorder() *recorder { return &recorder{added: make(chan struct{}, 1)} }

func (r *recorder) handle(e topic.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
	select {
	case r.added <- struct{}{}:
	default:
	}
}

// waitFor waits until the recorded events satisfy cond, and returns them.
func (r *recorder) waitFor(t *testing.T, what string, cond func([]topic.Event) bool) []topic.Event {
	t.Helper()
	timeout := time.After(15 * time.Second)
	for {
		r.mu.Lock()
		events := append([]topic.Event(nil), r.events...)
		r.mu.Unlock()
		if cond(events) {
			return events
		}
		select {
		case <-r.added:
		case <-timeout:
			t.Fatalf("timed out waiting for %s; events: %+v", what, events)
		}
	}
}

func count(events []topic.Event, kind topic.EventKind) int {
	n := 0
	for _, e := range events {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

func messages(events []topic.Event) []string {
	var out []string
	for _, e := range events {
		if e.Kind == topic.Message {
			out = append(out, e.Name+"="+string(e.Payload))
		}
	}
	return out
}

// TestPublishSubscribe: topics on different slots are subscribed (one connection per slot on
// the cluster), Subscribe returns after the Subscribed events, and every message published
// afterwards arrives in order with its topic name.
func TestPublishSubscribe(t *testing.T) {
	t.Parallel()
	valkeytest.OnTargets(t, func(t *testing.T, tg valkeytest.Target) {
		ctx := context.Background()
		tp := newTopics(t, tg.Client, topic.Config{})
		base := valkeytest.TestName(t)
		topics := []string{base[:min(len(base), 60)] + ".a", base[:min(len(base), 60)] + ".b"}
		slotA, slotB := keys.Slot(mustTopic(t, topics[0])), keys.Slot(mustTopic(t, topics[1]))
		require.NotEqual(t, slotA, slotB, "the topics should land on different slots")

		rec := newRecorder()
		sub, err := tp.Subscribe(ctx, topics, rec.handle)
		require.NoError(t, err)
		defer sub.Close()
		wantConns := 1
		if tg.Name == "cluster" {
			wantConns = 2
		}
		events := rec.waitFor(t, "subscribed", func(ev []topic.Event) bool { return count(ev, topic.Subscribed) == wantConns })
		for _, e := range events {
			require.Equal(t, topic.Subscribed, e.Kind)
			require.False(t, e.Resubscribed)
			require.Equal(t, 1, e.Count)
		}

		var want []string
		for i := range 10 {
			name := topics[i%2]
			n, err := tp.Publish(ctx, name, []byte(strconv.Itoa(i)))
			require.NoError(t, err)
			require.Equal(t, int64(1), n, "one subscriber")
			want = append(want, name+"="+strconv.Itoa(i))
		}
		events = rec.waitFor(t, "10 messages", func(ev []topic.Event) bool { return count(ev, topic.Message) == 10 })
		got := messages(events)
		// Order holds per connection; across slots the interleaving is free.
		for _, name := range topics {
			require.Equal(t, filter(want, name), filter(got, name), name)
		}
		for _, e := range events {
			if e.Kind == topic.Message {
				require.Equal(t, mustTopic(t, e.Name), e.Channel)
			}
		}
	})
}

func filter(ss []string, prefix string) []string {
	var out []string
	for _, s := range ss {
		if len(s) > len(prefix) && s[:len(prefix)+1] == prefix+"=" {
			out = append(out, s)
		}
	}
	return out
}

func mustTopic(t *testing.T, name string) string {
	t.Helper()
	ch, err := keys.TopicChannel(name)
	require.NoError(t, err)
	return ch
}

// TestSubscribeChannels: the channel-level subscribe takes topic channels and tables'
// invalidation channels (keys.Table.Inval) and refuses every other string.
func TestSubscribeChannels(t *testing.T) {
	t.Parallel()
	valkeytest.OnTargets(t, func(t *testing.T, tg valkeytest.Target) {
		ctx, c, tp, name := setup(t, tg, topic.Config{})
		table := keys.MustTable(name)
		q := keys.MustQueue(name)
		row, err := table.Row("r1")
		require.NoError(t, err)
		for _, bad := range []string{"", "inval", "{" + name + "}:inval", row, table.Record(), q.Pending(), q.Meta(), q.Wake()} {
			_, err := tp.SubscribeChannels(ctx, []string{mustTopic(t, name), bad}, func(topic.Event) {})
			require.ErrorIs(t, err, topic.ErrInvalid, bad)
		}

		rec := newRecorder()
		sub, err := tp.SubscribeChannels(ctx, []string{table.Inval(), mustTopic(t, name), table.Inval()}, rec.handle)
		require.NoError(t, err)
		defer sub.Close()
		require.Equal(t, []string{table.Inval(), mustTopic(t, name)}, sub.Channels(), "sorted, without repeats")
		// The cache's scripts publish invalidations with SPUBLISH on the table's slot.
		require.NoError(t, c.Do(ctx, c.B().Spublish().Channel(table.Inval()).Message("k1").Build()).Error())
		events := rec.waitFor(t, "the invalidation", func(ev []topic.Event) bool { return count(ev, topic.Message) == 1 })
		var msg topic.Event
		for _, e := range events {
			if e.Kind == topic.Message {
				msg = e
			}
		}
		require.Equal(t, topic.Event{Kind: topic.Message, Channel: table.Inval(), Name: name, Payload: []byte("k1")}, msg)
	})
}

// TestResubscribeAfterClientKill: when the server drops the subscriber's connection (CLIENT
// KILL TYPE pubsub), the handler hears Disconnected, then Subscribed with Resubscribed set and
// Count 2, and messages flow again.
func TestResubscribeAfterClientKill(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Start(t, valkeytest.WithoutPersistence())
	c := srv.Client(t)
	admin := srv.Client(t)
	tp := newTopics(t, c, topic.Config{})
	ctx := context.Background()
	name := valkeytest.TestName(t)

	rec := newRecorder()
	sub, err := tp.Subscribe(ctx, []string{name}, rec.handle)
	require.NoError(t, err)
	defer sub.Close()
	_, err = tp.Publish(ctx, name, []byte("before"))
	require.NoError(t, err)
	rec.waitFor(t, "the first message", func(ev []topic.Event) bool { return count(ev, topic.Message) == 1 })

	for round := 2; round <= 3; round++ {
		killed, err := admin.Do(ctx, admin.B().ClientKill().TypePubsub().Build()).AsInt64()
		require.NoError(t, err)
		require.Equal(t, int64(1), killed, "one subscriber connection")
		events := rec.waitFor(t, "the resubscription", func(ev []topic.Event) bool { return count(ev, topic.Subscribed) == round })
		tail := events[len(events)-2:]
		require.Equal(t, topic.Disconnected, tail[0].Kind)
		require.Error(t, tail[0].Err)
		require.Equal(t, []string{mustTopic(t, name)}, tail[0].Channels)
		require.Equal(t, topic.Subscribed, tail[1].Kind)
		require.True(t, tail[1].Resubscribed)
		require.Equal(t, round, tail[1].Count)
		require.Equal(t, round-1, count(events, topic.Disconnected))
	}

	_, err = tp.Publish(ctx, name, []byte("after"))
	require.NoError(t, err)
	events := rec.waitFor(t, "the message after the reconnects", func(ev []topic.Event) bool { return count(ev, topic.Message) == 2 })
	require.Equal(t, []string{name + "=before", name + "=after"}, messages(events))
}

// TestOverflow: a handler that falls behind loses messages, never silently: past the buffer,
// messages are dropped and an Overflow event with the exact count takes their place in the
// stream; the handler never blocks valkey-go's reader, so later messages still arrive.
func TestOverflow(t *testing.T) {
	t.Parallel()
	valkeytest.OnTargets(t, func(t *testing.T, tg valkeytest.Target) {
		ctx := context.Background()
		const buffer, sent = 4, 20
		tp := newTopics(t, tg.Client, topic.Config{SubscribeBuffer: buffer})
		name := valkeytest.TestName(t)

		stalled, release := make(chan struct{}), make(chan struct{})
		rec := newRecorder()
		var once sync.Once
		sub, err := tp.Subscribe(ctx, []string{name}, func(e topic.Event) {
			if e.Kind == topic.Message {
				once.Do(func() { close(stalled); <-release }) // stall on the first message
			}
			rec.handle(e)
		})
		require.NoError(t, err)
		var released sync.Once
		unstall := func() { released.Do(func() { close(release) }) }
		defer func() {
			unstall() // a failed assertion must not leave Close waiting on the stalled handler
			sub.Close()
		}()

		publish := func(i int) {
			_, err := tp.Publish(ctx, name, []byte(strconv.Itoa(i)))
			require.NoError(t, err)
		}
		// The first message must be in the handler before the rest arrive: were it still
		// queued, it would take one of the buffer's places and the counts below would differ.
		publish(0)
		select {
		case <-stalled:
		case <-time.After(15 * time.Second):
			t.Fatal("the first message never reached the handler")
		}
		for i := 1; i < sent; i++ {
			publish(i)
		}
		// One message is in the stalled handler, `buffer` are queued, the rest dropped.
		valkeytest.Eventually(t, 15*time.Second, "the drops to be recorded", func() bool {
			m, d := sub.Queued()
			return m == buffer && d == sent-1-buffer
		})
		unstall()
		// Every message is either delivered or counted in an Overflow event: the sum is exact.
		events := rec.waitFor(t, "every message delivered or counted", func(ev []topic.Event) bool {
			n := count(ev, topic.Message)
			for _, e := range ev {
				n += e.Dropped
			}
			return n == sent
		})
		require.Positive(t, count(events, topic.Overflow))
		require.Equal(t, buffer+1, count(events, topic.Message), "the stalled one and the buffer")
		// Each Overflow sits exactly where its messages went missing.
		last, dropped := -1, 0
		for _, e := range events {
			switch e.Kind {
			case topic.Overflow:
				require.Positive(t, e.Dropped)
				dropped += e.Dropped
			case topic.Message:
				seq, err := strconv.Atoi(string(e.Payload))
				require.NoError(t, err)
				require.Equal(t, last+1+dropped, seq, "the gap before message %d is its Overflow's count", seq)
				last, dropped = seq, 0
			}
		}
		require.Equal(t, sent-1, last+dropped, "the drops at the end are counted too")

		_, err = tp.Publish(ctx, name, []byte("later"))
		require.NoError(t, err)
		events = rec.waitFor(t, "a message after the overflow", func(ev []topic.Event) bool { return count(ev, topic.Message) == buffer+2 })
		require.Equal(t, topic.Message, events[len(events)-1].Kind)
		require.Equal(t, "later", string(events[len(events)-1].Payload))
	})
}

// TestSubscriptionCloseLeaksNothing: Close returns when every goroutine of the subscription
// ended. It is not parallel: goleak compares the whole process's goroutines.
func TestSubscriptionCloseLeaksNothing(t *testing.T) {
	srv := valkeytest.Shared(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	c, err := newPlainClient(srv.Addr)
	require.NoError(t, err)
	defer c.Close()
	tp := newTopics(t, c, topic.Config{})
	ctx := context.Background()
	rec := newRecorder()
	sub, err := tp.Subscribe(ctx, []string{valkeytest.TestName(t)}, rec.handle)
	require.NoError(t, err)
	_, err = tp.Publish(ctx, valkeytest.TestName(t), []byte("x"))
	require.NoError(t, err)
	rec.waitFor(t, "the message", func(ev []topic.Event) bool { return count(ev, topic.Message) == 1 })
	sub.Close()
	sub.Close() // a second Close is a no-op
}

// TestResubscribeAfterFailover: on a cluster, when the topic's slot fails over to its replica,
// the old primary ends the shard subscription; the subscriber reports Disconnected, finds the
// new primary, reports Subscribed with Resubscribed set, and hears messages published there.
func TestResubscribeAfterFailover(t *testing.T) {
	t.Parallel()
	cluster := valkeytest.StartCluster(t)
	c := cluster.Client(t)
	tp := newTopics(t, c, topic.Config{})
	ctx := context.Background()
	name := valkeytest.TestName(t)
	slot := keys.Slot(mustTopic(t, name))

	rec := newRecorder()
	sub, err := tp.Subscribe(ctx, []string{name}, rec.handle)
	require.NoError(t, err)
	defer sub.Close()
	require.NoError(t, cluster.Failover(ctx, slot))
	events := rec.waitFor(t, "the resubscription", func(ev []topic.Event) bool { return count(ev, topic.Subscribed) == 2 })
	require.Equal(t, 1, count(events, topic.Disconnected))
	last := events[len(events)-1]
	require.True(t, last.Resubscribed)
	require.Equal(t, 2, last.Count)

	// Publish until the cluster client's routing follows the failover too.
	valkeytest.Eventually(t, 15*time.Second, "a message through the new primary", func() bool {
		n, err := tp.Publish(ctx, name, []byte("after"))
		return err == nil && n == 1
	})
	rec.waitFor(t, "the message", func(ev []topic.Event) bool { return count(ev, topic.Message) >= 1 })
}
