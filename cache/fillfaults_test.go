package cache_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/tables"
)

// panickyCodec panics when it encodes, as a codec with a bug would.
type panickyCodec struct{ cache.JSON[user] }

func (panickyCodec) Marshal(user) ([]byte, error) { panic("codec exploded") }

// TestCodecPanicReleasesLease: a codec that panics while a fill holds the lease fails that
// Get (and GetMany) with a *PanicError and releases the lease, so another process's Get of
// the id loads at once instead of waiting out the lease.
func TestCodecPanicReleasesLease(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, client valkey.Client) {
		ctx := context.Background()
		name := tableName(t)
		src := &source{}
		bad, err := cache.NewTable(newCache(t, client), tables.Spec{Name: name}, src.load,
			&cache.TableOpts[string, user]{Codec: panickyCodec{}})
		require.NoError(t, err)
		good := newTable(t, newCache(t, client), tables.Spec{Name: name}, src)

		_, err = bad.Get(ctx, "k")
		var pe *cache.PanicError
		require.ErrorAs(t, err, &pe)
		require.Equal(t, "codec exploded", pe.Value)
		require.Empty(t, readRaw(t, client, rowKey(t, bad, "k")), "the lease was released")

		_, err = bad.GetMany(ctx, []string{"m1", "m2"})
		require.ErrorAs(t, err, &pe)
		require.Empty(t, readRaw(t, client, rowKey(t, bad, "m1")), "the batch's leases were released")
		require.Empty(t, readRaw(t, client, rowKey(t, bad, "m2")))

		start := time.Now()
		u, err := good.Get(ctx, "k")
		require.NoError(t, err)
		require.Equal(t, "name-k", u.Name)
		require.Less(t, time.Since(start), time.Second, "no lease to wait out (it would live %v)", good.Spec().LeaseTTL())
	})
}

// TestFillWaitTimeoutNamesTheFill: a Get whose deadline passes while it waits on a fill says
// which table and id it waited for, and still matches context.DeadlineExceeded. The deadline
// passes when the loader has been called, so the Get is waiting on the fill by then: a
// deadline of a fixed 50 ms could pass during the read of the row before it, under -race
// on a loaded machine, and that read's error is another one (it names the key).
func TestFillWaitTimeoutNamesTheFill(t *testing.T) {
	t.Parallel()
	client := targets[0].client(t)
	loading := make(chan struct{})
	var once sync.Once
	load := func(ctx context.Context, id string) (user, error) {
		once.Do(func() { close(loading) })
		<-ctx.Done() // the fill's own context: the cache's Close ends it
		return user{}, ctx.Err()
	}
	// L2Timeout: relaxedL2, so a slow read of the row does not send the Get to degraded mode.
	tbl, err := cache.NewTable(newCache(t, client), tables.Spec{Name: tableName(t), L2Timeout: relaxedL2}, load, nil)
	require.NoError(t, err)
	_, err = tbl.Get(deadlineWhen{context.Background(), loading}, "slow-id")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.False(t, errors.Is(err, cache.ErrL2), "the caller's deadline, not an L2 failure")
	require.Contains(t, err.Error(), tbl.Name())
	require.Contains(t, err.Error(), `"slow-id"`)
}

// deadlineWhen is a context whose deadline passes when ch is closed: a deadline set by an
// event of the test rather than by the clock.
type deadlineWhen struct {
	context.Context
	ch <-chan struct{}
}

func (c deadlineWhen) Done() <-chan struct{} { return c.ch }

func (c deadlineWhen) Err() error {
	select {
	case <-c.ch:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// TestRefusedFillWriteReleasesItsLease: the server refuses the write of a filled row (out of
// memory under noeviction, from the moment the loader ran): the caller gets the loader's value
// and the fill's lease is released at once, so the next read of the id, here or in another
// process, does not wait out the lease's lifetime (LeaseTTL) for a row that will not come.
func TestRefusedFillWriteReleasesItsLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := valkeytest.Start(t, valkeytest.WithoutPersistence())
	client := srv.Client(t)
	_, err := srv.Do(ctx, "CONFIG", "SET", "maxmemory-policy", "noeviction")
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = srv.Do(context.Background(), "CONFIG", "SET", "maxmemory", "0") })
	spec := tables.Spec{Name: tableName(t), L2Timeout: relaxedL2, LoaderTimeout: 10 * time.Second}
	load := func(ctx context.Context, id string) (user, error) {
		_, err := srv.Do(ctx, "CONFIG", "SET", "maxmemory", "1") // the lease is taken; the row's write will be refused
		return user{ID: id, Name: "name-" + id}, err
	}
	tbl, err := cache.NewTable(newCache(t, client), spec, load, nil)
	require.NoError(t, err)
	u, err := tbl.Get(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, "name-k", u.Name)
	require.Empty(t, readRaw(t, client, rowKey(t, tbl, "k")), "the fill's lease is gone, not left to expire")

	// The same through GetMany, whose refused write left the lease to expire: every other
	// process's read of the id waited the lease's lifetime (LoaderTimeout + 500 ms).
	_, err = srv.Do(ctx, "CONFIG", "SET", "maxmemory", "0")
	require.NoError(t, err)
	got, err := tbl.GetMany(ctx, []string{"m"})
	require.NoError(t, err)
	require.Equal(t, "name-m", got["m"].Name)
	require.Empty(t, readRaw(t, client, rowKey(t, tbl, "m")), "GetMany's lease is gone too")
}
