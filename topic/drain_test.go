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
