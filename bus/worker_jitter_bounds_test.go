package bus

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestHousekeepIntervalHuge: NewWorker accepts any HousekeepInterval, so a huge one (a
// "practically never") must give the housekeeping timer a positive wait, not panic in
// rand.N on the loop's goroutine (which crashes the process at Start) nor wrap negative.
func TestHousekeepIntervalHuge(t *testing.T) {
	t.Parallel()
	for _, d := range []time.Duration{1 << 62, 5e18, 8e18, math.MaxInt64} {
		cfg := WorkerConfig{Queue: "q", HousekeepInterval: d}.withDefaults(DefaultLease)
		require.NoError(t, cfg.validate())
		require.NotPanics(t, func() {
			require.Positive(t, jitter(cfg.HousekeepInterval), "interval %v", d)
		}, "interval %d", d)
	}
}
