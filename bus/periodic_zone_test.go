package bus_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
)

// TestPeriodicZoneLocal: Zone "Local" is no IANA zone but the zone of each process that reads
// the row (time.LoadLocation("Local") is time.Local), so schedulers in processes of different
// local zones would fire one cron tick at different instants, one job each. It is refused,
// naming Zone, and nothing is written. So are localtime and posixrules, which the zone
// database of common systems links to the host's own zone (Debian's localtime is
// /etc/localtime: time.LoadLocation("localtime") loads it).
func TestPeriodicZoneLocal(t *testing.T) {
	t.Parallel()
	ctx, c, b, name, _ := periodicSetup(t)
	for _, zone := range []string{"Local", "localtime", "posixrules"} {
		err := b.DeclarePeriodic(ctx, name, bus.Periodic{Name: "p", Cron: "0 9 * * *", Zone: zone, Payload: []byte("x")})
		require.ErrorIs(t, err, bus.ErrInvalid, zone)
		require.Contains(t, err.Error(), "Zone")
	}
	require.Empty(t, scanAll(t, c, "{"+name+"}"), "nothing written")
}
