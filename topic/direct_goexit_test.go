package topic_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/topic"
)

// TestCloseAfterHandlerGoexit: a handler that ends its own goroutine (runtime.Goexit, which
// t.FailNow does) must not make Close hang, whether the message was queued or delivered
// directly (Config.DirectDelivery): the direct run frees the handler and the connection by
// defer.
func TestCloseAfterHandlerGoexit(t *testing.T) {
	t.Parallel()
	for _, direct := range []bool{false, true} {
		t.Run(map[bool]string{false: "queued", true: "direct"}[direct], func(t *testing.T) {
			srv := valkeytest.Start(t, valkeytest.WithoutPersistence())
			tp := newTopics(t, srv.Client(t), topic.Config{DirectDelivery: direct})
			ctx := context.Background()
			name := valkeytest.TestName(t)

			subscribed, entered := make(chan struct{}), make(chan struct{})
			sub, err := tp.Subscribe(ctx, []string{name}, func(e topic.Event) {
				switch e.Kind {
				case topic.Subscribed:
					close(subscribed)
				case topic.Message:
					close(entered)
					runtime.Goexit()
				}
			})
			require.NoError(t, err)
			<-subscribed
			_, err = tp.Publish(ctx, name, []byte("x"))
			require.NoError(t, err)
			select {
			case <-entered:
			case <-time.After(15 * time.Second):
				t.Fatal("no message")
			}
			closed := make(chan struct{})
			go func() {
				sub.Close()
				close(closed)
			}()
			select {
			case <-closed:
			case <-time.After(5 * time.Second):
				t.Fatal("Close hangs after the handler ended its goroutine")
			}
		})
	}
}
