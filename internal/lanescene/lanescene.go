// Package lanescene is the queue the exporters' lane tests observe (contrib/prometheus and
// contrib/otel, nested modules): one scene, what a queue's lane gauges must show, and the
// check of an exporter's, so both exporters are held to the same numbers.
package lanescene

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
)

// seed fills queue: lane a holds 3 jobs and an urgent one (priority 2), lane b 3 under a rate
// of one claim an hour. Before a claim, 6 jobs wait in the lanes' sets, 1 is urgent and both
// lanes are ready; a claim of 10 then takes 5 (the urgent job, a's 3 and one of b's), and b is
// held back by its rate with 2 jobs waiting, both lanes having claimed jobs.
func seed(ctx context.Context, b *bus.Bus, queue string) error {
	for range 3 {
		for _, lane := range []string{"a", "b"} {
			if _, err := b.Enqueue(ctx, queue, []byte("x"), &bus.EnqueueOpts{Lane: lane}); err != nil {
				return err
			}
		}
	}
	if _, err := b.Enqueue(ctx, queue, []byte("x"), &bus.EnqueueOpts{Lane: "a", Priority: 2}); err != nil {
		return err
	}
	return b.SetLaneLimits(ctx, queue, "b", bus.LaneLimits{Rate: bus.Rate{Limit: 1, Per: time.Hour}})
}

// gauges is what queue's lane gauges must show now, read from its Counts: "waiting/lanes",
// "waiting/urgent" (the waiting jobs of the lanes' sets, of priority 1 to 3), and
// "lanes/ready", "lanes/held", "lanes/active".
func gauges(ctx context.Context, b *bus.Bus, queue string) (map[string]float64, error) {
	c, err := b.Counts(ctx, queue)
	if err != nil {
		return nil, err
	}
	return map[string]float64{
		"waiting/lanes": float64(c.InLanes), "waiting/urgent": float64(c.Urgent),
		"lanes/ready": float64(c.LanesReady), "lanes/held": float64(c.LanesHeld), "lanes/active": float64(c.LanesActive),
	}, nil
}

// Check seeds queue, then requires read (an exporter's lane gauges, keyed as gauges keys
// them) to show gauges and the scene's numbers, before and after a claim of 10.
func Check(t testing.TB, b *bus.Bus, queue string, read func() map[string]float64) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, seed(ctx, b, queue))
	want := func() map[string]float64 {
		g, err := gauges(ctx, b, queue)
		require.NoError(t, err)
		return g
	}
	before := read()
	require.Equal(t, want(), before)
	require.Equal(t, map[string]float64{"waiting/lanes": 6, "waiting/urgent": 1, "lanes/ready": 2, "lanes/held": 0, "lanes/active": 0}, before)
	jobs, err := b.Claim(ctx, queue, &bus.ClaimOpts{Count: 10})
	require.NoError(t, err)
	require.Len(t, jobs, 5)
	after := read()
	require.Equal(t, want(), after)
	require.Equal(t, map[string]float64{"waiting/lanes": 2, "waiting/urgent": 0, "lanes/ready": after["lanes/ready"], "lanes/held": 1, "lanes/active": 2}, after,
		"b is held back by its rate, a and b have claimed jobs")
}
