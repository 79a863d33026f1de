package cache_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/tables"
)

// blockingSource is a loader that parks every call until released, so tests can act while
// a load is in flight.
type blockingSource struct {
	started chan string
	release chan struct{}
	calls   atomicCounter
}

type atomicCounter struct {
	mu sync.Mutex
	n  int
}

func (c *atomicCounter) inc() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	return c.n
}

func (c *atomicCounter) get() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func newBlocking() *blockingSource {
	return &blockingSource{started: make(chan string, 16), release: make(chan struct{})}
}

func (b *blockingSource) load(ctx context.Context, id string) (user, error) {
	b.calls.inc()
	b.started <- id
	select {
	case <-b.release:
		return user{ID: id, Name: "name-" + id}, nil
	case <-ctx.Done():
		return user{}, ctx.Err()
	}
}

// TestLoaderTimeout: a loader that runs past LoaderTimeout fails every caller waiting on it
// with an error matching ErrLoaderTimeout; other ids are served meanwhile; nothing is cached
// and the lease is released, so the next Get tries again.
func TestLoaderTimeout(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, client valkey.Client) {
		ctx := context.Background()
		var slowCalls atomicCounter
		joined := make(chan struct{})
		load := func(ctx context.Context, id string) (user, error) {
			if id == "slow" {
				slowCalls.inc()
				<-joined
				<-ctx.Done() // honours its context, as loaders should
				return user{}, ctx.Err()
			}
			return user{ID: id}, nil
		}
		tbl, err := cache.NewTable(newCache(t, client), tables.Spec{L2Timeout: relaxedL2, Name: tableName(t), LoaderTimeout: 200 * time.Millisecond}, load, nil)
		require.NoError(t, err)
		const waiters = 10
		var joins atomicCounter
		tbl.SetHookJoined(func(id string) {
			if id == "slow" && joins.inc() == waiters {
				close(joined) // every waiter is on the one fill: let the loader time out
			}
		})

		errs := make([]error, waiters)
		var wg sync.WaitGroup
		for i := range waiters {
			wg.Go(func() { _, errs[i] = tbl.Get(ctx, "slow") })
		}
		u, err := tbl.Get(ctx, "fast")
		require.NoError(t, err, "other ids are unharmed")
		require.Equal(t, "fast", u.ID)
		wg.Wait()
		for i, err := range errs {
			require.ErrorIs(t, err, cache.ErrLoaderTimeout, "waiter %d", i)
			require.ErrorIs(t, err, context.DeadlineExceeded, "waiter %d", i)
			var le *cache.LoadError
			require.ErrorAs(t, err, &le)
			require.True(t, le.Timeout)
			require.Equal(t, "slow", le.ID)
		}
		require.Equal(t, 1, slowCalls.get(), "the waiters shared one load")
		require.Empty(t, readRaw(t, client, rowKey(t, tbl, "slow")), "the lease was released, nothing cached")
		require.Equal(t, int64(1), tbl.Stats().LoadErrors)

		tbl.SetHookJoined(nil)
		_, err = tbl.Get(ctx, "slow")
		require.ErrorIs(t, err, cache.ErrLoaderTimeout)
		require.Equal(t, 2, slowCalls.get(), "a failure is not cached")
	})
}

// TestLoaderPanic: a panicking loader is an error carrying the panic and its stack for every
// caller waiting on it; the process and other ids are unharmed.
func TestLoaderPanic(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, client valkey.Client) {
		ctx := context.Background()
		gate := make(chan struct{})
		load := func(ctx context.Context, id string) (user, error) {
			if id == "boom" {
				<-gate
				panic(fmt.Sprintf("loader exploded on %s", id))
			}
			return user{ID: id}, nil
		}
		tbl, err := cache.NewTable(newCache(t, client), tables.Spec{L2Timeout: relaxedL2, Name: tableName(t)}, load, nil)
		require.NoError(t, err)

		const waiters = 10
		var joins atomicCounter
		tbl.SetHookJoined(func(id string) {
			if joins.inc() == waiters {
				close(gate) // every waiter is on the one fill: let it panic
			}
		})
		errs := make([]error, waiters)
		var wg sync.WaitGroup
		for i := range waiters {
			wg.Go(func() { _, errs[i] = tbl.Get(ctx, "boom") })
		}
		wg.Wait()
		for i, err := range errs {
			var pe *cache.PanicError
			require.ErrorAs(t, err, &pe, "waiter %d", i)
			require.Equal(t, "loader exploded on boom", pe.Value)
			require.Contains(t, err.Error(), "loader exploded on boom")
			require.Contains(t, err.Error(), "get_loader_test.go", "the error text carries the stack")
			require.NotErrorIs(t, err, cache.ErrLoaderTimeout)
		}
		tbl.SetHookJoined(nil)
		u, err := tbl.Get(ctx, "fine")
		require.NoError(t, err)
		require.Equal(t, "fine", u.ID)
		require.Empty(t, readRaw(t, client, rowKey(t, tbl, "boom")), "the lease was released")
		require.Equal(t, int64(1), tbl.Stats().LoadErrors)
	})
}

// TestCallerCancelDoesNotSpoilFill: a caller whose context ends returns at once; the fill
// it started goes on and serves the others.
func TestCallerCancelDoesNotSpoilFill(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, client valkey.Client) {
		b := newBlocking()
		tbl, err := cache.NewTable(newCache(t, client), tables.Spec{L2Timeout: relaxedL2, Name: tableName(t)}, b.load, nil)
		require.NoError(t, err)

		impatient, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { _, err := tbl.Get(impatient, "k"); done <- err }()
		recv(t, b.started, 10*time.Second)
		patient := make(chan user, 1)
		go func() {
			u, err := tbl.Get(context.Background(), "k")
			if err == nil {
				patient <- u
			}
			close(patient)
		}()
		cancel()
		require.ErrorIs(t, recv(t, done, 10*time.Second), context.Canceled)
		close(b.release)
		u, ok := <-patient
		require.True(t, ok, "the patient caller gets the value")
		require.Equal(t, "name-k", u.Name)
		require.Equal(t, 1, b.calls.get())
		require.Equal(t, "value", cache.ParsedKind(readRaw(t, client, rowKey(t, tbl, "k"))))
	})
}
