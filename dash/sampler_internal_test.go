package dash

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
)

// TestSamplerForgetsQueuesReadOnce: a queue the sampler read once (no ring yet: a ring takes
// two reads) and that then left the registry is forgotten; its previous read stayed in prev
// for the dashboard's life, a leak with short-lived queues (a queue per tenant, per import).
func TestSamplerForgetsQueuesReadOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := valkeytest.Shared(t).Client(t)
	b, err := bus.New(c, bus.Config{})
	require.NoError(t, err)
	s := newSampler(c, b, 10, 1<<20)
	name := valkeytest.TestName(t)
	_, err = b.Enqueue(ctx, name, []byte("x"), nil)
	require.NoError(t, err)
	s.pass(ctx)
	_, read := s.prev[name]
	require.True(t, read)
	_, err = b.DropQueue(ctx, name, nil)
	require.NoError(t, err)
	s.pass(ctx)
	_, kept := s.prev[name]
	require.False(t, kept, "a queue gone from the registry is forgotten")
}
