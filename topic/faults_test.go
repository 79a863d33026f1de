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

// TestDrainAfterDropReportsLoss: the subscription's connection is killed, a message is
// published (to no subscriber), and Drain begins before the subscription noticed: the
// message was lost, so the handler must see a Disconnected, never nothing. The connection's
// goroutine took Drain's start for the end it asked for and returned without reporting the
// drop (silent in 6 to 10 of 40 tries).
func TestDrainAfterDropReportsLoss(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Start(t, valkeytest.WithoutPersistence())
	c, admin := srv.Client(t), srv.Client(t)
	tp := newTopics(t, c, topic.Config{})
	ctx := context.Background()
	for i := range 40 {
		name := valkeytest.TestName(t) + strconv.Itoa(i)
		r := newRecorder()
		sub, err := tp.Subscribe(ctx, []string{name}, r.handle)
		require.NoError(t, err)
		require.NoError(t, admin.Do(ctx, admin.B().ClientKill().TypePubsub().Build()).Error())
		n, err := tp.Publish(ctx, name, []byte("lost?"))
		require.NoError(t, err)
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		sub.Drain(dctx)
		cancel()
		r.mu.Lock()
		events := r.events
		r.mu.Unlock()
		if n == 0 {
			require.Positive(t, count(events, topic.Message)+count(events, topic.Disconnected),
				"try %d: a message published before Drain was lost without a Disconnected", i)
		}
	}
}

// TestDrainBoundedByItsContext: Drain delivers the queued events within its context and drops
// the rest when it ends, as its doc says: with a 50 ms handler and 100 messages queued, a
// Drain of 300 ms returned after the whole backlog (about 5 s).
func TestDrainBoundedByItsContext(t *testing.T) {
	t.Parallel()
	c := valkeytest.Shared(t).Client(t)
	tp := newTopics(t, c, topic.Config{})
	ctx := context.Background()
	name := valkeytest.TestName(t)
	var handled atomic.Int64
	sub, err := tp.Subscribe(ctx, []string{name}, func(e topic.Event) {
		if e.Kind == topic.Message {
			time.Sleep(50 * time.Millisecond)
			handled.Add(1)
		}
	})
	require.NoError(t, err)
	for i := range 100 {
		_, err := tp.Publish(ctx, name, []byte(strconv.Itoa(i)))
		require.NoError(t, err)
	}
	dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	sub.Drain(dctx)
	took := time.Since(start)
	t.Logf("Drain of 300 ms took %v; %d of 100 messages handled", took, handled.Load())
	require.Less(t, took, 2*time.Second, "Drain outlived its context by the backlog")
	require.Less(t, handled.Load(), int64(100))
}

// TestEndWhileServerStopped: with the server stopped (SIGSTOP), Close and a Drain of 300 ms
// return within a second or so: the connection is closed, not handed back to the client,
// which would unsubscribe it first and wait for the stopped server until it gives the
// connection up (12 s).
func TestEndWhileServerStopped(t *testing.T) {
	t.Parallel()
	for _, drain := range []bool{false, true} {
		srv := valkeytest.Start(t, valkeytest.WithoutPersistence())
		tp := newTopics(t, srv.Client(t), topic.Config{})
		sub, err := tp.Subscribe(context.Background(), []string{valkeytest.TestName(t)}, newRecorder().handle)
		require.NoError(t, err)
		require.NoError(t, srv.Stop())
		start := time.Now()
		if drain {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			sub.Drain(ctx)
			cancel()
		} else {
			sub.Close()
		}
		took := time.Since(start)
		require.NoError(t, srv.Continue())
		t.Logf("drain %v: ended in %v with the server stopped", drain, took)
		require.Less(t, took, 4*time.Second, "drain %v", drain)
	}
}
