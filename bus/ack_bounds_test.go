package bus_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
)

// TestAckHugeTimeout: Ack.Timeout is validated as not negative only, so the largest
// Duration is an accepted "wait as long as it takes"; it must reach the server as a valid
// wait, not overflow into a negative timeout the server refuses.
func TestAckHugeTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBus(t, valkeytest.Shared(t).Client(t), bus.Config{})
	name := valkeytest.TestName(t)
	_, err := b.Enqueue(ctx, name, []byte("x"), &bus.EnqueueOpts{Ack: bus.Ack{Durability: bus.Persisted, Timeout: time.Duration(math.MaxInt64)}})
	require.NoError(t, err)
}
