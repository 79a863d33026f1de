package cache_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/tables"
)

// TestGetWaitingOnAnotherFillerCountsOnce: a Get that finds another process's fill lease,
// waits for it and is answered by the row that filler wrote is one read, counted once (a
// miss: it found neither a value nor a not-found), never as a miss and an L2 hit both.
func TestGetWaitingOnAnotherFillerCountsOnce(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, client valkey.Client) {
		ctx := context.Background()
		name := tableName(t)
		spec := tables.Spec{Name: name, L2Timeout: relaxedL2, EarlyRefreshBeta: tables.Off}
		started, release := make(chan struct{}), make(chan struct{})
		var startOnce sync.Once
		slow := func(ctx context.Context, id string) (user, error) {
			startOnce.Do(func() { close(started) })
			select {
			case <-release:
			case <-ctx.Done():
				return user{}, ctx.Err()
			}
			return user{ID: id, Name: "filled"}, nil
		}
		a, err := cache.NewTable(newCache(t, client), spec, slow, nil)
		require.NoError(t, err)
		other := &source{}
		b := newTable(t, newCache(t, client), spec, other)

		aDone := make(chan error, 1)
		go func() {
			_, err := a.Get(ctx, "k")
			aDone <- err
		}()
		recv(t, started, 10*time.Second) // a holds the lease and is loading
		var readOnce sync.Once
		b.SetHookAfterRead(func(string) { readOnce.Do(func() { close(release) }) })

		got, err := b.Get(ctx, "k")
		require.NoError(t, err)
		require.Equal(t, "filled", got.Name)
		require.NoError(t, recv(t, aDone, 10*time.Second))
		require.Zero(t, other.calls.Load(), "b waited for a's fill")
		st := b.Stats()
		require.Equal(t, [3]int64{0, 1, 0}, [3]int64{st.L1Hits, st.Misses, st.L2Hits},
			"one read, counted once: a miss (L1 hits, misses, L2 hits)")

		// GetMany waits for another filler's lease through the same path.
		started, release = make(chan struct{}), make(chan struct{})
		startOnce, readOnce = sync.Once{}, sync.Once{}
		go func() {
			_, err := a.Get(ctx, "m")
			aDone <- err
		}()
		recv(t, started, 10*time.Second)
		many, err := b.GetMany(ctx, []string{"m"})
		require.NoError(t, err)
		require.Equal(t, "filled", many["m"].Name)
		require.NoError(t, recv(t, aDone, 10*time.Second))
		st = b.Stats()
		require.Equal(t, [3]int64{0, 2, 0}, [3]int64{st.L1Hits, st.Misses, st.L2Hits},
			"GetMany's read of m counts once too")
	})
}
