package bus_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
)

// TestLaneRateRaisedApplies: SetLaneLimits says the limits apply from the next claim. A lane
// that a slow rate (one claim an hour) holds back, given a fast rate, gives its next job at
// the next claim, not an hour later; cleared limits too.
func TestLaneRateRaisedApplies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		to   bus.LaneLimits
	}{
		{"raised", bus.LaneLimits{Rate: bus.Rate{Limit: 1000}}},
		{"cleared", bus.LaneLimits{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, _, b, name, _ := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
			require.NoError(t, b.SetLaneLimits(ctx, name, "slow", bus.LaneLimits{Rate: bus.Rate{Limit: 1, Per: time.Hour}}))
			enqueueLane(t, b, name, "slow", 0, 2, "s")
			require.Len(t, claimN(t, b, name, 2), 1, "one claim an hour")
			require.NoError(t, b.SetLaneLimits(ctx, name, "slow", tc.to))
			info, err := b.Lane(ctx, name, "slow")
			require.NoError(t, err)
			require.Len(t, claimN(t, b, name, 1), 1, "the new limits apply from the next claim (lane held until %v)", info.HeldUntil)
		})
	}
}
