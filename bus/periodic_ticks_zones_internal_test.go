package bus

import (
	"testing"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/stretchr/testify/require"
)

// TestTicksNextAcrossChanges: around every change of offset in 2025 and 2026 of zones whose
// clocks move by an hour, half an hour, two hours, at midnight or with an offset of 45
// minutes, next gives exactly the instants whose wall clock the spec names, as a scan of every
// minute finds them.
func TestTicksNextAcrossChanges(t *testing.T) {
	t.Parallel()
	zones := []string{"America/New_York", "Europe/Paris", "Australia/Sydney", "Australia/Lord_Howe",
		"America/Santiago", "America/Havana", "Asia/Beirut", "Africa/Cairo", "Antarctica/Troll", "Pacific/Chatham"}
	specs := []string{"0 0 * * *", "0 * * * *", "30 * * * *", "30 2 * * *", "30 1 * * *", "45 1 * * *",
		"0 3 * * *", "0 23 * * *", "*/15 * * * *", "0 0 * * 0", "0 0 1 * *", "15 0 * * *"}
	matches := func(s *cron.SpecSchedule, w time.Time) bool {
		if 1<<uint(w.Second())&s.Second == 0 || 1<<uint(w.Minute())&s.Minute == 0 ||
			1<<uint(w.Hour())&s.Hour == 0 || 1<<uint(w.Month())&s.Month == 0 {
			return false
		}
		dom, dow := 1<<uint(w.Day())&s.Dom > 0, 1<<uint(w.Weekday())&s.Dow > 0
		if s.Dom&(1<<63) > 0 || s.Dow&(1<<63) > 0 {
			return dom && dow
		}
		return dom || dow
	}
	for _, zone := range zones {
		loc, err := time.LoadLocation(zone)
		require.NoError(t, err)
		var changes []time.Time
		for at := time.Date(2025, 1, 1, 0, 0, 0, 0, loc); ; {
			_, end := at.ZoneBounds()
			if end.IsZero() || end.Year() > 2026 {
				break
			}
			changes, at = append(changes, end), end
		}
		require.NotEmpty(t, changes, zone)
		for _, spec := range specs {
			tk, err := periodicSpec{Cron: spec, Zone: zone, Missed: "latest"}.compile()
			require.NoError(t, err)
			s := tk.cron.(*cron.SpecSchedule)
			for _, change := range changes {
				from, to := change.Add(-36*time.Hour), change.Add(36*time.Hour)
				var want, got []string
				for at := from.Add(time.Minute); !at.After(to); at = at.Add(time.Minute) {
					if matches(s, at.In(loc)) {
						want = append(want, at.In(loc).Format(time.RFC3339))
					}
				}
				for at := tk.next(from.UnixMilli()); at >= 0 && at <= to.UnixMilli(); at = tk.next(at) {
					got = append(got, time.UnixMilli(at).In(loc).Format(time.RFC3339))
				}
				require.Equal(t, want, got, "%s %q around %v", zone, spec, change.In(loc))
			}
		}
	}
}
