package topic_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/topic"
)

// TestFlappingServerBacksOff: a server that confirms the subscription and drops the
// connection right after (here: the handler kills it on every Subscribed) is not hammered:
// each resubscribe after a connection that did not stay up waits longer than the last,
// 25-50 ms, then 50-100, 100-200, 200-400. Before the fix every drop of a connection that
// had subscribed reset the backoff, so the subscription reconnected in a tight loop.
func TestFlappingServerBacksOff(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Start(t, valkeytest.WithoutPersistence())
	admin := srv.Client(t)
	// No connection counts as stable here, however late the handler runs.
	tp := newTopics(t, srv.Client(t), topic.StableAfter(topic.Config{}, time.Hour))
	ctx := context.Background()
	const rounds = 5

	var (
		mu        sync.Mutex
		killErr   error
		firstKill time.Time
	)
	resubscribed := make(chan time.Duration, 1)
	sub, err := tp.Subscribe(ctx, []string{valkeytest.TestName(t)}, func(e topic.Event) {
		if e.Kind != topic.Subscribed {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if e.Count == rounds {
			resubscribed <- time.Since(firstKill)
			return
		}
		if firstKill.IsZero() {
			firstKill = time.Now()
		}
		n, err := admin.Do(ctx, admin.B().ClientKill().TypePubsub().Build()).AsInt64()
		if err == nil && n != 1 {
			err = fmt.Errorf("killed %d connections, want 1", n)
		}
		if err != nil && killErr == nil {
			killErr = err
		}
	})
	require.NoError(t, err)
	defer sub.Close()

	var elapsed time.Duration
	select {
	case elapsed = <-resubscribed:
	case <-time.After(30 * time.Second):
		t.Fatal("no Subscribed event with Count 5")
	}
	mu.Lock()
	require.NoError(t, killErr)
	mu.Unlock()
	// The least the jittered backoffs of the four reconnects add up to.
	const least = 25*time.Millisecond + 50*time.Millisecond + 100*time.Millisecond + 200*time.Millisecond
	require.GreaterOrEqual(t, elapsed, least, "%d reconnects of a flapping connection took %v", rounds-1, elapsed)
}
