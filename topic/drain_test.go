package topic_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/topic"
)

// TestDrain: with a slow handler, messages queue (or wait in the connection, with direct
// delivery) behind it; Drain delivers every one published before it was called, in order, and
// returns once the server confirmed the unsubscribe, long before its context ends. Close would
// drop them.
func TestDrain(t *testing.T) {
	t.Parallel()
	for _, direct := range []bool{false, true} {
		t.Run(map[bool]string{false: "queued", true: "direct"}[direct], func(t *testing.T) {
			t.Parallel()
			srv := valkeytest.Start(t, valkeytest.WithoutPersistence())
			tp := newTopics(t, srv.Client(t), topic.Config{DirectDelivery: direct})
			ctx := context.Background()
			name := valkeytest.TestName(t)
			const n = 50
			var got atomic.Int64
			var order atomic.Bool
			order.Store(true)
			subscribed := make(chan struct{})
			sub, err := tp.Subscribe(ctx, []string{name}, func(e topic.Event) {
				switch e.Kind {
				case topic.Subscribed:
					close(subscribed)
				case topic.Message:
					if string(e.Payload) != strconv.FormatInt(got.Load(), 10) {
						order.Store(false)
					}
					got.Add(1)
					time.Sleep(2 * time.Millisecond)
				}
			})
			require.NoError(t, err)
			<-subscribed
			for i := range n {
				_, err := tp.Publish(ctx, name, []byte(strconv.Itoa(i)))
				require.NoError(t, err)
			}
			require.Less(t, got.Load(), int64(n), "the handler is behind when Drain is called")
			dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			start := time.Now()
			sub.Drain(dctx)
			require.Equal(t, int64(n), got.Load(), "every message published before Drain was handled")
			require.True(t, order.Load(), "in order")
			require.Less(t, time.Since(start), 5*time.Second, "Drain returned on the unsubscribe, not its deadline")
			sub.Close() // after Drain: nothing
		})
	}
}

// TestDrainDuringResubscribe: Drain begins while a connection is between its check for Drain
// and its SSUBSCRIBE (after the server dropped the one before). Drain's SUNSUBSCRIBE reaches
// the server first and does nothing; the connection subscribes after it and, unsubscribing
// itself once confirmed, still ends. It stayed subscribed, and Drain waited for its whole
// context (forever with context.Background), Close after it too.
func TestDrainDuringResubscribe(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Start(t, valkeytest.WithoutPersistence())
	ctx := context.Background()
	var sub atomic.Pointer[topic.Subscription]
	var attempts atomic.Int64
	drained := make(chan time.Duration, 1)
	cfg := topic.BeforeSubscribe(topic.Config{}, func() {
		if attempts.Add(1) != 2 {
			return
		}
		// The resubscribe: Drain begins now, and sends its SUNSUBSCRIBE before this
		// connection's SSUBSCRIBE.
		go func() {
			dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			start := time.Now()
			sub.Load().Drain(dctx)
			drained <- time.Since(start)
		}()
		time.Sleep(200 * time.Millisecond)
	})
	tp := newTopics(t, srv.Client(t), cfg)
	name := valkeytest.TestName(t)
	s, err := tp.Subscribe(ctx, []string{name}, func(topic.Event) {})
	require.NoError(t, err)
	sub.Store(s)
	time.Sleep(150 * time.Millisecond) // up long enough to count as stable: resubscribed at once
	admin := srv.Client(t)
	n, err := admin.Do(ctx, admin.B().ClientKill().TypePubsub().Build()).AsInt64()
	require.NoError(t, err)
	require.Positive(t, n)
	select {
	case took := <-drained:
		require.Less(t, took, 5*time.Second, "Drain ended on the unsubscribe, not its deadline")
	case <-time.After(15 * time.Second):
		t.Fatal("Drain did not return")
	}
	require.EqualValues(t, 2, attempts.Load())
	valkeytest.Eventually(t, 5*time.Second, "no connection holds a shard subscription", func() bool {
		chans, err := admin.Do(ctx, admin.B().PubsubShardchannels().Build()).AsStrSlice()
		require.NoError(t, err)
		return len(chans) == 0
	})
}
