package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
)

// TestSchedulerHalfHourDST: cron schedules in Australia/Lord_Howe, whose clocks move by half an
// hour (02:00 +10:30 to 02:30 +11 on 2025-10-05; 02:00 +11 back to 01:30 +10:30 on
// 2026-04-05), driven by passes every 10 minutes of an injected clock. Each wall time the spec
// names fires at each instant it happens: the days of the changes lose no tick after the
// change and gain none the spec does not name.
func TestSchedulerHalfHourDST(t *testing.T) {
	t.Parallel()
	lh, err := time.LoadLocation("Australia/Lord_Howe")
	require.NoError(t, err)
	at := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339, s)
		require.NoError(t, err)
		return tm
	}
	for _, tc := range []struct {
		name, cron, from, to string
		want                 []string // fired ticks, wall clock on Lord Howe
	}{
		{"spring daily 01:30", "30 1 * * *", "2025-10-04T00:00:00+10:30", "2025-10-07T00:00:00+11:00",
			[]string{"2025-10-04T01:30:00+10:30", "2025-10-05T01:30:00+10:30", "2025-10-06T01:30:00+11:00"}},
		{"spring daily 03:00", "0 3 * * *", "2025-10-04T00:00:00+10:30", "2025-10-07T00:00:00+11:00",
			[]string{"2025-10-04T03:00:00+10:30", "2025-10-05T03:00:00+11:00", "2025-10-06T03:00:00+11:00"}},
		{"fall daily 03:00", "0 3 * * *", "2026-04-04T00:00:00+11:00", "2026-04-07T00:00:00+10:30",
			[]string{"2026-04-04T03:00:00+11:00", "2026-04-05T03:00:00+10:30", "2026-04-06T03:00:00+10:30"}},
		{"fall daily 23:00", "0 23 * * *", "2026-04-04T00:00:00+11:00", "2026-04-07T00:00:00+10:30",
			[]string{"2026-04-04T23:00:00+11:00", "2026-04-05T23:00:00+10:30", "2026-04-06T23:00:00+10:30"}},
		{"fall midnight", "0 0 * * *", "2026-04-04T12:00:00+11:00", "2026-04-07T12:00:00+10:30",
			[]string{"2026-04-05T00:00:00+11:00", "2026-04-06T00:00:00+10:30", "2026-04-07T00:00:00+10:30"}},
		{"fall daily 02:00", "0 2 * * *", "2026-04-04T12:00:00+11:00", "2026-04-06T12:00:00+10:30",
			[]string{"2026-04-05T02:00:00+10:30", "2026-04-06T02:00:00+10:30"}},
		{"fall daily 01:45", "45 1 * * *", "2026-04-04T12:00:00+11:00", "2026-04-06T12:00:00+10:30",
			[]string{"2026-04-05T01:45:00+11:00", "2026-04-05T01:45:00+10:30", "2026-04-06T01:45:00+10:30"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, c, b, name, q := periodicSetup(t)
			require.NoError(t, b.DeclarePeriodic(ctx, name, bus.Periodic{Name: "p", Cron: tc.cron, Zone: "Australia/Lord_Howe", Kind: "report"}))
			from, to := at(tc.from), at(tc.to)
			setLast(t, c, q, "p", from.UnixMilli()) // as if declared at the window's start
			s := newScheduler(t, b, bus.SchedulerConfig{Queue: name})
			now := from
			s.SetServerNow(func(context.Context) (time.Time, error) { return now, nil })
			for ; !now.After(to); now = now.Add(10 * time.Minute) {
				_, err := s.Pass(ctx)
				require.NoError(t, err)
			}
			var got []string
			for tick, n := range pendingTicks(t, c, q) {
				require.Equal(t, 1, n)
				got = append(got, time.UnixMilli(tick).In(lh).Format(time.RFC3339))
			}
			require.ElementsMatch(t, tc.want, got)
			st := s.Stats()
			require.Equal(t, int64(len(tc.want)), st.Fired)
			require.Zero(t, st.Fenced+st.Skipped+st.Errors)
		})
	}
}
