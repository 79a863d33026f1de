package bus_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// TestMaxBatch: EnqueueBatch, Claim and CompleteMany take MaxBatch jobs in one call and refuse
// one more with ErrInvalid, writing nothing: a call is one script, which the server runs alone.
// RetryDead and PurgeDead refuse MaxBatch + 1 ids, and the Limits of Promote, Reap, PurgeDead
// and Browse past MaxBatch are refused the same way.
func TestMaxBatch(t *testing.T) {
	t.Parallel()
	ctx, _, b, name, _ := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	_, err := b.EnqueueBatch(ctx, name, payloads(bus.MaxBatch+1, "x"), nil)
	require.ErrorIs(t, err, bus.ErrInvalid)
	require.ErrorContains(t, err, "at most 10000 (MaxBatch)")
	c, err := b.Counts(ctx, name)
	require.NoError(t, err)
	require.Zero(t, c.Pending, "a refused batch adds nothing")

	_, err = b.EnqueueBatch(ctx, name, payloads(bus.MaxBatch+1, "x")[:bus.MaxBatch], nil)
	require.NoError(t, err)
	_, err = b.Claim(ctx, name, &bus.ClaimOpts{Count: bus.MaxBatch + 1})
	require.ErrorIs(t, err, bus.ErrInvalid)
	require.ErrorContains(t, err, "ClaimOpts.Count 10001")
	jobs, err := b.Claim(ctx, name, &bus.ClaimOpts{Count: bus.MaxBatch})
	require.NoError(t, err)
	require.Len(t, jobs, bus.MaxBatch)

	_, _, err = b.ExtendMany(ctx, append(jobs, jobs[0]), nil)
	require.ErrorIs(t, err, bus.ErrInvalid)
	require.ErrorContains(t, err, "(MaxBatch)")
	_, err = b.CompleteMany(ctx, append(jobs, jobs[0]), nil)
	require.ErrorIs(t, err, bus.ErrInvalid)
	c, err = b.Counts(ctx, name)
	require.NoError(t, err)
	require.Equal(t, int64(bus.MaxBatch), c.Active, "a refused CompleteMany retires nothing")
	stale, err := b.CompleteMany(ctx, jobs, nil)
	require.NoError(t, err)
	require.Empty(t, stale)
	c, err = b.Counts(ctx, name)
	require.NoError(t, err)
	require.Zero(t, c.Active)

	over := make([]keys.JobID, bus.MaxBatch+1)
	for i := range over {
		over[i] = keys.NewJobID()
	}
	_, err = b.RetryDead(ctx, name, over...)
	require.ErrorIs(t, err, bus.ErrInvalid)
	_, err = b.PurgeDead(ctx, name, &bus.PurgeOpts{IDs: over})
	require.ErrorIs(t, err, bus.ErrInvalid)
	for what, call := range map[string]func() error{
		"promote": func() error { _, err := b.Promote(ctx, name, &bus.PromoteOpts{Limit: bus.MaxBatch + 1}); return err },
		"reap":    func() error { _, err := b.Reap(ctx, name, &bus.ReapOpts{Limit: bus.MaxBatch + 1}); return err },
		"purge":   func() error { _, err := b.PurgeDead(ctx, name, &bus.PurgeOpts{Limit: bus.MaxBatch + 1}); return err },
		"browse":  func() error { _, err := b.Browse(ctx, name, &bus.BrowseOpts{Limit: bus.MaxBatch + 1}); return err },
	} {
		err := call()
		require.ErrorIs(t, err, bus.ErrInvalid, what)
		require.ErrorContains(t, err, "at most 10000 (MaxBatch)", what)
	}
	_, err = b.Promote(ctx, name, &bus.PromoteOpts{Limit: bus.MaxBatch})
	require.NoError(t, err)
}
