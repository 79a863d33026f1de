package main

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// TestRetryAllEveryDeadJob: emq retry --all retries every job dead when it starts, even when
// a fast-failing worker sends retried jobs back to dead meanwhile: none of them is retried
// twice in place of one that is never retried.
func TestRetryAllEveryDeadJob(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Shared(t)
	ctx := context.Background()
	b, err := bus.New(srv.Client(t), bus.Config{})
	require.NoError(t, err)
	q := valkeytest.TestName(t)
	const dead = 600
	ids := make([]keys.JobID, 0, dead)
	for range dead {
		e, err := b.Enqueue(ctx, q, []byte("poison"), nil)
		require.NoError(t, err)
		ids = append(ids, e.ID)
	}
	for {
		jobs, err := b.Claim(ctx, q, &bus.ClaimOpts{Count: 100})
		require.NoError(t, err)
		if len(jobs) == 0 {
			break
		}
		for _, j := range jobs {
			_, err := b.Fail(ctx, j, &bus.FailOpts{MaxAttempts: 1, Error: "broken"})
			require.NoError(t, err)
		}
	}

	// A worker that fails every job it claims straight back to dead.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			jobs, err := b.Claim(ctx, q, &bus.ClaimOpts{Count: 10})
			if err != nil || len(jobs) == 0 {
				time.Sleep(time.Millisecond)
				continue
			}
			for _, j := range jobs {
				b.Fail(ctx, j, &bus.FailOpts{MaxAttempts: 1, Error: "still broken"})
			}
		}
	}()
	ok(t, srv.Addr, "retry", q, "--all", "--yes")
	close(stop)
	wg.Wait()

	never := 0
	for _, id := range ids {
		info, err := b.Lookup(ctx, q, id)
		require.NoError(t, err)
		if info.State == bus.StateDead && info.Attempts == 1 {
			never++ // still dead from before the command, never retried
		}
	}
	require.Zero(t, never, "jobs dead when emq retry --all started and never retried")
}
