package bus_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// deadJobs makes n dead jobs on queue (claimed, then failed with a maximum of 1).
func deadJobs(t *testing.T, b *bus.Bus, queue string, n int) []keys.JobID {
	t.Helper()
	ctx := context.Background()
	var ids []keys.JobID
	for range n {
		e, err := b.Enqueue(ctx, queue, []byte("x"), nil)
		require.NoError(t, err)
		ids = append(ids, e.ID)
	}
	js, err := b.Claim(ctx, queue, &bus.ClaimOpts{Count: n})
	require.NoError(t, err)
	require.Len(t, js, n)
	for _, j := range js {
		_, err := b.Fail(ctx, j, &bus.FailOpts{MaxAttempts: 1, Error: "x"})
		require.NoError(t, err)
	}
	return ids
}

// TestPurgeDeadSelection: an empty, non-nil IDs selects nothing and is refused; it used to
// read as "the oldest Limit", and purged them for good. With IDs, Limit is ignored, as its doc
// says (a Limit past MaxBatch was refused).
func TestPurgeDeadSelection(t *testing.T) {
	t.Parallel()
	ctx, _, b, name, _ := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	ids := deadJobs(t, b, name, 3)
	gone, err := b.PurgeDead(ctx, name, &bus.PurgeOpts{IDs: []keys.JobID{}})
	require.ErrorIs(t, err, bus.ErrInvalid)
	require.Empty(t, gone)
	cs, err := b.Counts(ctx, name)
	require.NoError(t, err)
	require.EqualValues(t, 3, cs.Dead, "nothing purged")

	gone, err = b.PurgeDead(ctx, name, &bus.PurgeOpts{IDs: ids[:1], Limit: bus.MaxBatch + 1})
	require.NoError(t, err)
	require.Equal(t, ids[:1], gone)
	gone, err = b.PurgeDead(ctx, name, nil)
	require.NoError(t, err)
	require.Equal(t, ids[1:], gone)
}

// TestCountsPastScriptRange: math.MaxInt, a natural "unlimited", as Config.MaxAttempts,
// MaxPayload and PromoteLimit, and as a call's MaxAttempts or PromoteLimit, is read as the
// largest count the scripts take. They used to be passed as they were, and every enqueue,
// claim, fail and reap was refused with an EMQARGS that named no Go field.
func TestCountsPastScriptRange(t *testing.T) {
	t.Parallel()
	big := bus.Config{MaxAttempts: math.MaxInt, MaxPayload: math.MaxInt, PromoteLimit: math.MaxInt}
	ctx, _, b, name, _ := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, big)
	_, err := b.Enqueue(ctx, name, []byte("x"), &bus.EnqueueOpts{Delay: time.Millisecond})
	require.NoError(t, err)
	_, err = b.Enqueue(ctx, name, []byte("y"), nil)
	require.NoError(t, err)
	time.Sleep(5 * time.Millisecond)
	js, err := b.Claim(ctx, name, &bus.ClaimOpts{Count: 2, PromoteLimit: math.MaxInt, Lease: time.Millisecond})
	require.NoError(t, err)
	require.Len(t, js, 2, "the due job promoted first")
	out, err := b.Fail(ctx, js[0], &bus.FailOpts{MaxAttempts: math.MaxInt})
	require.NoError(t, err)
	require.NotEqual(t, bus.StateDead, out.State)
	time.Sleep(5 * time.Millisecond)
	reaped, err := b.Reap(ctx, name, &bus.ReapOpts{MaxAttempts: math.MaxInt})
	require.NoError(t, err)
	require.Len(t, reaped.Requeued, 1, "the other lease ran out: back to pending, far from any maximum")
}
