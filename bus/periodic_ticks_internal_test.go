package bus

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestTicksDue: the due ticks of a period and of a cron spec, the newest keep of them oldest
// first, including a backlog past maxDueScan.
func TestTicksDue(t *testing.T) {
	t.Parallel()
	every, err := periodicSpec{EveryMs: 200, Missed: "catch_up", CatchUp: 5}.compile()
	require.NoError(t, err)
	due, n := every.due(1_000, 3_050, 5)
	require.Equal(t, []int64{2_200, 2_400, 2_600, 2_800, 3_000}, due)
	require.Equal(t, 10, n)
	due, n = every.due(1_000, 1_199, 5)
	require.Empty(t, due)
	require.Zero(t, n)
	fire, skip, _ := every.plan(1_000, 1_250)
	require.Equal(t, []int64{1_200}, fire)
	require.Zero(t, skip)

	secondly, err := periodicSpec{Cron: "* * * * * *", Missed: "catch_up", CatchUp: 3}.compile()
	require.NoError(t, err)
	now := time.Date(2026, 6, 1, 12, 0, 0, 500_000_000, time.UTC).UnixMilli()
	last := now - 2*24*3600*1000 // 172,800 ticks: past maxDueScan
	start := time.Now()
	due, n = secondly.due(last, now, 3)
	require.Less(t, time.Since(start), 10*time.Second)
	require.Equal(t, []int64{now - 2_500, now - 1_500, now - 500}, due)
	require.Equal(t, maxDueScan+1, n)

	skipper, err := periodicSpec{Cron: "@hourly", Missed: "skip"}.compile()
	require.NoError(t, err)
	hour := int64(3600 * 1000)
	fire, skip, _ = skipper.plan(0, 3*hour+5)
	require.Empty(t, fire)
	require.Equal(t, 3*hour, skip)
	fire, skip, _ = skipper.plan(3*hour, 4*hour)
	require.Equal(t, []int64{4 * hour}, fire)
	require.Zero(t, skip)
	require.Equal(t, 5*hour, skipper.next(4*hour))
	never, err := periodicSpec{Cron: "0 0 30 2 *", Missed: "latest"}.compile()
	require.NoError(t, err)
	require.Equal(t, int64(-1), never.next(0))
}
