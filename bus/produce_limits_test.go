package bus_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// TestEnqueueMaxDurations: durations at the int64 limit (the "forever" of time.Duration) are
// whole milliseconds rounded up without overflow: a Delay of math.MaxInt64 schedules the job
// about 292 years ahead, and a UniqueTTL of math.MaxInt64 keeps the guard that long, instead
// of a script's refusal of a negative argument.
func TestEnqueueMaxDurations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := valkeytest.Shared(t).Client(t)
	b := newBus(t, c, bus.Config{})
	name := valkeytest.TestName(t)
	q := keys.MustQueue(name)
	forever := time.Duration(math.MaxInt64)

	before := serverMillis(t, c)
	e, err := b.Enqueue(ctx, name, []byte("x"), &bus.EnqueueOpts{Delay: forever})
	require.NoError(t, err, "Delay of math.MaxInt64")
	score, err := c.Do(ctx, c.B().Zscore().Key(q.Schedule()).Member(e.ID.String()).Build()).AsFloat64()
	require.NoError(t, err)
	require.GreaterOrEqual(t, int64(score), before+forever.Milliseconds())

	e, err = b.Enqueue(ctx, name, []byte("y"), &bus.EnqueueOpts{UniqueKey: "k", UniqueTTL: forever})
	require.NoError(t, err, "UniqueTTL of math.MaxInt64")
	require.False(t, e.Duplicate)

	b2 := newBus(t, c, bus.Config{UniqueTTL: forever})
	_, err = b2.Enqueue(ctx, name, []byte("z"), &bus.EnqueueOpts{UniqueKey: "k2"})
	require.NoError(t, err, "Config.UniqueTTL of math.MaxInt64")
}
