package dash_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/dash"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// TestSampler: each pass adds one sample per queue, the fleet's rate between the workers'
// consecutive snapshots; the ring keeps the newest Samples; a queue that leaves the registry
// loses its ring.
func TestSampler(t *testing.T) {
	t.Parallel()
	client := valkeytest.Shared(t).Client(t)
	s := setup(t, client, dash.Config{SampleEvery: time.Hour, Samples: 3})
	valkeytest.Eventually(t, 10*time.Second, "the sampler's first pass", func() bool { return dash.Passes(s.dash) >= 1 })
	ctx := context.Background()
	q := name(t, "")
	require.NoError(t, s.bus.Pause(ctx, q)) // lists the queue
	snap := func(completed, failed int) string {
		return fmt.Sprintf(`{"v":1,"every_ms":5000,"started_ms":1,"concurrency":4,"kinds":["k"],"running":2,"completed":%d,"failed":%d}`, completed, failed)
	}
	report(t, client, q, "w1", snap(0, 0))
	dash.Sample(ctx, s.dash)
	first, err := s.bus.WorkerStats(ctx, q)
	require.NoError(t, err)
	c, _ := dash.Series(s.dash, q)
	require.Empty(t, c, "one read is no rate yet")

	for i := 1; i <= 4; i++ {
		time.Sleep(20 * time.Millisecond) // the snapshots' server times differ
		report(t, client, q, "w1", snap(100*i, 10*i))
		prev := first
		var err error
		first, err = s.bus.WorkerStats(ctx, q)
		require.NoError(t, err)
		want := first.Rates(prev)
		require.Equal(t, 1, want.Workers)
		dash.Sample(ctx, s.dash)
		completed, failed := dash.Series(s.dash, q)
		require.Len(t, completed, min(i, 3), "the ring keeps the newest 3")
		require.InDelta(t, want.Completed, completed[len(completed)-1], 1e-9)
		require.InDelta(t, want.Failed, failed[len(failed)-1], 1e-9)
		require.Greater(t, completed[len(completed)-1], 0.0)
	}

	code, body := s.get("/queues/" + q)
	require.Equal(t, 200, code)
	require.Contains(t, body, `<dd data-field="workers">1</dd>`)

	require.NoError(t, client.Do(ctx, client.B().Zrem().Key(keys.QueueRegistry()).Member(q).Build()).Error())
	dash.Sample(ctx, s.dash)
	c, _ = dash.Series(s.dash, q)
	require.Empty(t, c, "a queue that left the registry lost its ring")
}

// TestConfig: bad fields are refused by name.
func TestConfig(t *testing.T) {
	t.Parallel()
	client := valkeytest.Shared(t).Client(t)
	b := setup(t, client, dash.Config{}).bus
	for _, tc := range []struct {
		cfg  dash.Config
		want string
	}{
		{dash.Config{}, "Config.Bus"},
		{dash.Config{Bus: b, Prefix: "echo"}, "Config.Prefix"},
		{dash.Config{Bus: b, Prefix: "/echo/"}, "Config.Prefix"},
		{dash.Config{Bus: b, SampleEvery: -1}, "Config.SampleEvery"},
		{dash.Config{Bus: b, Samples: -1}, "Config.Samples"},
		{dash.Config{Bus: b, MaxQueues: -1}, "Config.MaxQueues"},
		{dash.Config{Bus: b, Secret: []byte("short")}, "Config.Secret"},
	} {
		_, err := dash.New(tc.cfg)
		require.ErrorIs(t, err, dash.ErrInvalid)
		require.ErrorContains(t, err, tc.want)
	}
}
