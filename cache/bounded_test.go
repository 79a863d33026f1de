package cache_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/tables"
)

// TestL2TimeoutBoundsReads: with valkey-server SIGSTOPped, a Get or GetMany without a
// deadline fails within the table's L2Timeout with ErrL2 and ErrL2Timeout; a caller whose own
// deadline or cancellation comes first gets its own error, not an L2 failure.
func TestL2TimeoutBoundsReads(t *testing.T) {
	t.Parallel()
	const l2Timeout = 100 * time.Millisecond
	srv := valkeytest.Start(t)
	src := &source{}
	spec := tables.Spec{L2Timeout: l2Timeout, DegradedLoads: tables.Off}
	tbl := newTable(t, newCache(t, srv.Client(t)), spec, src)
	require.NoError(t, srv.Stop())
	t.Cleanup(func() { _ = srv.Continue() })

	type result struct {
		err     error
		elapsed time.Duration
	}
	run := func(ctx context.Context, f func(ctx context.Context) error) result {
		done := make(chan result, 1)
		go func() {
			start := time.Now()
			err := f(ctx)
			done <- result{err, time.Since(start)}
		}()
		return recv(t, done, 10*time.Second) // without the bound, a read without a deadline never returns
	}
	get := func(ctx context.Context) error { _, err := tbl.Get(ctx, "k"); return err }
	getMany := func(ctx context.Context) error { _, err := tbl.GetMany(ctx, []string{"a", "b"}); return err }
	for name, f := range map[string]func(context.Context) error{"Get": get, "GetMany": getMany} {
		r := run(context.Background(), f)
		t.Logf("%s with Valkey stopped: %v after %v", name, r.err, r.elapsed)
		require.ErrorIs(t, r.err, cache.ErrL2, name)
		require.ErrorIs(t, r.err, cache.ErrL2Timeout, name)
		require.False(t, errors.Is(r.err, context.DeadlineExceeded), "%s: not the caller's deadline", name)
		require.Less(t, r.elapsed, l2Timeout+slack, name)
	}

	short, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	r := run(short, get)
	require.ErrorIs(t, r.err, context.DeadlineExceeded)
	require.NotErrorIs(t, r.err, cache.ErrL2, "the caller's deadline is not an L2 failure")

	cancelled, cancel2 := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel2() }()
	r = run(cancelled, getMany)
	require.ErrorIs(t, r.err, context.Canceled)
	require.NotErrorIs(t, r.err, cache.ErrL2)
	require.Zero(t, src.calls.Load(), "no loader call while degraded mode is off")
}
