package cache_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/tables"
)

// TestOwnMessagesNotAppliedTwice: a cache's subscriber does not drop the ids of its own
// writes again (the writer dropped them after the script ran): an entry the writer read back
// after its Set survives its own message, while another cache's message drops it. Stats
// report propagation as a histogram, and Config.OnInvalidation sees every applied message.
func TestOwnMessagesNotAppliedTwice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := valkeytest.Shared(t).Client(t)
	var mu sync.Mutex
	var seen []string
	c, err := cache.New(client, cache.Config{OnInvalidation: func(table string, ids []string) {
		mu.Lock()
		seen = append(seen, ids...)
		mu.Unlock()
	}})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	hold := make(chan struct{})
	held := make(chan struct{}, 1)
	c.SetHookMessage(func(string, []byte) bool {
		select {
		case held <- struct{}{}:
			<-hold // the first message waits until the test lets it go
		default:
		}
		return true
	})
	applied := make(chan []string, 16)
	c.SetHookDropped(func(_ string, ids []string) { applied <- ids })
	spec := tables.Spec{Name: tableName(t), L2Timeout: relaxedL2, DegradedLoads: tables.Off}
	src := &source{}
	a, err := cache.NewTable(c, spec, src.load, nil)
	require.NoError(t, err)
	other := newCache(t, client)
	b, err := cache.NewTable(other, spec, src.load, nil)
	require.NoError(t, err)

	require.NoError(t, a.Set(ctx, "k", user{ID: "k", Name: "v2"}))
	recv(t, held, 10*time.Second) // a's own message is in, held before it is applied
	_, tier, err := a.Lookup(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, cache.TierL2, tier, "the writer reads its write back")
	close(hold)
	require.Equal(t, []string{"k"}, recv(t, applied, 10*time.Second))
	got, ok := cache.PeekL1(a, "k")
	require.True(t, ok, "the writer's own message did not drop the entry it read back")
	require.Equal(t, "v2", got.Name)

	require.NoError(t, b.Set(ctx, "k", user{ID: "k", Name: "v3"}))
	require.Equal(t, []string{"k"}, recv(t, applied, 10*time.Second))
	_, ok = cache.PeekL1(a, "k")
	require.False(t, ok, "another cache's message drops it")
	v, err := a.Get(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, "v3", v.Name)
	mu.Lock()
	saw := slices.Clone(seen)
	mu.Unlock() // before the assertion: a failure must not leave the handler blocked on mu
	require.Equal(t, []string{"k", "k"}, saw, "OnInvalidation saw both messages")

	for i := range 50 {
		require.NoError(t, b.Invalidate(ctx, "x"+string(rune('a'+i%26))))
		recv(t, applied, 10*time.Second)
	}
	st := a.Stats()
	require.Equal(t, int64(52), st.PropagationCount)
	var n int64
	for _, bk := range st.PropagationHistogram {
		n += bk.Count
		require.Positive(t, bk.UpTo)
	}
	require.Equal(t, st.PropagationCount, n, "the histogram holds every message")
	require.Positive(t, st.PropagationP50)
	require.LessOrEqual(t, st.PropagationP50, st.PropagationP99)
	require.LessOrEqual(t, st.PropagationP99, st.PropagationMax+st.PropagationMax/8+time.Microsecond, "p99 within a bucket of the max")
	t.Logf("propagation: p50 %v p99 %v max %v over %d", st.PropagationP50, st.PropagationP99, st.PropagationMax, st.PropagationCount)
}
