package bus_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
)

// TestPeriodicZoneLocal: Zone "Local" is no IANA zone but the zone of each process that reads
// the row (time.LoadLocation("Local") is time.Local), so schedulers in processes of different
// local zones would fire one cron tick at different instants, one job each. It is refused,
// naming Zone, and nothing is written.
func TestPeriodicZoneLocal(t *testing.T) {
	t.Parallel()
	ctx, c, b, name, _ := periodicSetup(t)
	err := b.DeclarePeriodic(ctx, name, bus.Periodic{Name: "p", Cron: "0 9 * * *", Zone: "Local", Payload: []byte("x")})
	require.ErrorIs(t, err, bus.ErrInvalid)
	require.Contains(t, err.Error(), "Zone")
	require.Empty(t, scanAll(t, c, "{"+name+"}"), "nothing written")
}
