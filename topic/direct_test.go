package topic_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/topic"
)

// TestDirectDelivery: with Config.DirectDelivery the handler still sees every message once,
// one event at a time and in order per connection, when messages of two topics (two
// connections on a cluster) arrive while it is busy now and then, so that some reach it on a
// reader and some through the queue.
func TestDirectDelivery(t *testing.T) {
	t.Parallel()
	valkeytest.OnTargets(t, func(t *testing.T, tg valkeytest.Target) {
		ctx := context.Background()
		tp := newTopics(t, tg.Client, topic.Config{DirectDelivery: true})
		names := []string{valkeytest.TestName(t) + ".a", valkeytest.TestName(t) + ".b"}
		const each = 300

		var running, overlaps atomic.Int32
		var mu sync.Mutex
		got := map[string][]int{}
		total := make(chan struct{})
		sub, err := tp.Subscribe(ctx, names, func(e topic.Event) {
			if running.Add(1) != 1 {
				overlaps.Add(1)
			}
			defer running.Add(-1)
			if e.Kind != topic.Message {
				return
			}
			n, err := strconv.Atoi(string(e.Payload))
			if err != nil {
				return
			}
			if n%10 == 0 {
				time.Sleep(time.Millisecond) // busy: what arrives meanwhile is queued
			}
			mu.Lock()
			got[e.Name] = append(got[e.Name], n)
			if len(got[names[0]])+len(got[names[1]]) == 2*each {
				close(total)
			}
			mu.Unlock()
		})
		require.NoError(t, err)
		defer sub.Close()

		var wg sync.WaitGroup
		for _, name := range names {
			wg.Go(func() {
				for i := range each {
					_, err := tp.Publish(ctx, name, []byte(strconv.Itoa(i)))
					require.NoError(t, err)
				}
			})
		}
		wg.Wait()
		select {
		case <-total:
		case <-time.After(15 * time.Second):
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("received %d and %d of %d messages a topic", len(got[names[0]]), len(got[names[1]]), each)
		}
		require.Zero(t, overlaps.Load(), "the handler ran twice at once")
		for _, name := range names {
			require.Len(t, got[name], each, name)
			for i, n := range got[name] {
				require.Equal(t, i, n, "%s: message %d arrived as the %dth", strings.TrimPrefix(name, names[0]), n, i)
			}
		}
		_, dropped := sub.Queued()
		require.Zero(t, dropped)
	})
}

// TestDirectDeliveryClose: Close waits for a handler that runs on a connection's reader, as it
// does for one on the subscription's goroutine.
func TestDirectDeliveryClose(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Start(t, valkeytest.WithoutPersistence())
	tp := newTopics(t, srv.Client(t), topic.Config{DirectDelivery: true})
	ctx := context.Background()
	name := valkeytest.TestName(t)

	entered, release := make(chan struct{}), make(chan struct{})
	var returned atomic.Bool
	sub, err := tp.Subscribe(ctx, []string{name}, func(e topic.Event) {
		if e.Kind == topic.Message {
			close(entered)
			<-release
			returned.Store(true)
		}
	})
	require.NoError(t, err)
	_, err = tp.Publish(ctx, name, []byte("x"))
	require.NoError(t, err)
	select {
	case <-entered:
	case <-time.After(15 * time.Second):
		t.Fatal("the message never reached the handler")
	}
	closed := make(chan struct{})
	go func() {
		sub.Close()
		close(closed)
	}()
	select {
	case <-closed:
		t.Fatal("Close returned while the handler ran")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	select {
	case <-closed:
	case <-time.After(15 * time.Second):
		t.Fatal("Close did not return once the handler did")
	}
	require.True(t, returned.Load())
}
