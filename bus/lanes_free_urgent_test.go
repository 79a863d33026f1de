package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
)

// TestLaneFreedSlotUrgentWakes: a lane at its cap whose waiting jobs are all urgent (its
// lanepending empty, urgent holding its jobs) gets a slot back when one of its claimed jobs
// leaves active. Every script that frees the slot pushes a wake marker (FORMAT lanes: "when
// the lane has waiting jobs"), as lanepause's resume does for the same case; without it idle
// workers sleep on the wake list until WakeTimeout while the urgent job could be claimed.
func TestLaneFreedSlotUrgentWakes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		lease time.Duration
		free  func(ctx context.Context, b *bus.Bus, queue string, j bus.Job) error
	}{
		{"complete", time.Minute, func(ctx context.Context, b *bus.Bus, _ string, j bus.Job) error {
			return b.Complete(ctx, j, nil)
		}},
		{"completemany", time.Minute, func(ctx context.Context, b *bus.Bus, _ string, j bus.Job) error {
			_, err := b.CompleteMany(ctx, []bus.Job{j}, nil)
			return err
		}},
		{"fail", time.Minute, func(ctx context.Context, b *bus.Bus, _ string, j bus.Job) error {
			_, err := b.Fail(ctx, j, &bus.FailOpts{MaxAttempts: 1})
			return err
		}},
		{"snooze", time.Minute, func(ctx context.Context, b *bus.Bus, _ string, j bus.Job) error {
			_, err := b.Snooze(ctx, j, time.Hour, nil)
			return err
		}},
		{"reap", 20 * time.Millisecond, func(ctx context.Context, b *bus.Bus, queue string, _ bus.Job) error {
			time.Sleep(60 * time.Millisecond)
			r, err := b.Reap(ctx, queue, &bus.ReapOpts{MaxAttempts: 1})
			if err == nil && len(r.Dead) != 1 {
				return context.DeadlineExceeded
			}
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, c, b, name, q := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
			require.NoError(t, b.SetLaneLimits(ctx, name, "c", bus.LaneLimits{Cap: 1}))
			enqueueLane(t, b, name, "c", 0, 1, "c")
			jobs, err := b.Claim(ctx, name, &bus.ClaimOpts{Count: 1, Lease: tc.lease})
			require.NoError(t, err)
			require.Len(t, jobs, 1)
			enqueueLane(t, b, name, "c", 2, 1, "urgent-c")
			require.Empty(t, claimN(t, b, name, 1), "c is at its cap")
			require.NoError(t, c.Do(ctx, c.B().Del().Key(q.Wake()).Build()).Error())
			require.NoError(t, tc.free(ctx, b, name, jobs[0]))
			n, err := c.Do(ctx, c.B().Llen().Key(q.Wake()).Build()).AsInt64()
			require.NoError(t, err)
			require.Positive(t, n, "a wake marker for the freed lane's urgent job")
		})
	}
}

// TestLaneRetiredSlotUrgentClaimed: laneclaim's retire path (CompleteAndClaim of a queue with
// lanes) frees the slot of a lane at its cap whose waiting jobs are all urgent; the claim that
// follows in the same call takes the urgent job (laneclaim reads urgent itself, so the lane
// needs no place in laneready and no marker: the caller is the worker that claims).
func TestLaneRetiredSlotUrgentClaimed(t *testing.T) {
	t.Parallel()
	ctx, _, b, name, _ := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	require.NoError(t, b.SetLaneLimits(ctx, name, "c", bus.LaneLimits{Cap: 1}))
	enqueueLane(t, b, name, "c", 0, 1, "c")
	jobs := claimN(t, b, name, 1)
	require.Len(t, jobs, 1)
	u := enqueueLane(t, b, name, "c", 2, 1, "urgent-c")
	require.Empty(t, claimN(t, b, name, 1), "c is at its cap")
	got, err := b.CompleteAndClaim(ctx, jobs[0], &bus.ClaimOpts{Count: 1, Lease: time.Minute})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, u[0], got[0].ID)
}
