package dash

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDurAndPlural: the overview's header says "last 15s" and "every 250ms", not "15.0s" and
// "250.0ms"; a count says "1 job", "6 jobs".
func TestDurAndPlural(t *testing.T) {
	for d, want := range map[time.Duration]string{
		420 * time.Microsecond:  "420µs",
		250 * time.Millisecond:  "250ms",
		1100 * time.Microsecond: "1.1ms",
		15 * time.Second:        "15s",
		1500 * time.Millisecond: "1.5s",
		90 * time.Second:        "1.5m",
		2 * time.Hour:           "2h",
	} {
		require.Equal(t, want, dur(d), "%v", d)
	}
	require.Equal(t, "0 jobs", plural(0, "job"))
	require.Equal(t, "1 job", plural(1, "job"))
	require.Equal(t, "1,200 dead jobs", plural(1200, "dead job"))
}
