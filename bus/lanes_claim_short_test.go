package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
)

// TestLaneClaimNotShortWhileWorkWaits: a laneclaim of one job assumes the lane whose turn it is
// holds one (it is in the round robin); when that lane has just given its last job, the call
// pops nothing and stops at its bound (wait 0). Claim and CompleteAndClaim then claim again at
// once, so a caller never gets no jobs while jobs it may claim wait.
func TestLaneClaimNotShortWhileWorkWaits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBus(t, valkeytest.Shared(t).Client(t), bus.Config{})
	for _, viaComplete := range []bool{false, true} {
		queue := valkeytest.TestName(t)
		if viaComplete {
			queue += ".complete"
		}
		enqueueLane(t, b, queue, "a", 0, 1, "a")
		enqueueLane(t, b, queue, "b", 0, 3, "b")
		// a, b, then a's turn again: its set is empty, and the claim goes on to b.
		var order []string
		var held bus.Job
		for i := range 4 {
			var jobs []bus.Job
			var err error
			if viaComplete && i > 0 {
				jobs, err = b.CompleteAndClaim(ctx, held, &bus.ClaimOpts{Count: 1, Lease: time.Minute})
			} else {
				jobs, err = b.Claim(ctx, queue, &bus.ClaimOpts{Count: 1, Lease: time.Minute})
			}
			require.NoError(t, err)
			require.Len(t, jobs, 1, "claim %d of 1 job, after %v, with jobs waiting (complete and claim: %t)", i+1, order, viaComplete)
			held = jobs[0]
			order = append(order, string(held.Payload))
		}
		require.Equal(t, []string{"a0", "b0", "b1", "b2"}, order)
		jobs, err := b.Claim(ctx, queue, &bus.ClaimOpts{Count: 1, Lease: time.Minute})
		require.NoError(t, err)
		require.Empty(t, jobs, "nothing waits")
	}
}
