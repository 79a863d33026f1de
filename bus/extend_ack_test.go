package bus_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
)

// TestExtendStaleWithAck: Extend of a job whose token no longer holds it answers the
// *StaleError even when the call's Ack falls short (no replica): a holder that asks for a
// replicated extend must still learn that it lost the lease.
func TestExtendStaleWithAck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBus(t, valkeytest.Shared(t).Client(t), bus.Config{})
	name := valkeytest.TestName(t)
	_, err := b.Enqueue(ctx, name, []byte("x"), nil)
	require.NoError(t, err)
	jobs, err := b.Claim(ctx, name, &bus.ClaimOpts{Lease: time.Millisecond})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	old := jobs[0]
	time.Sleep(5 * time.Millisecond)
	_, err = b.Reap(ctx, name, nil)
	require.NoError(t, err)
	again, err := b.Claim(ctx, name, nil)
	require.NoError(t, err)
	require.Len(t, again, 1)
	require.Greater(t, again[0].Token, old.Token)

	ack := bus.Ack{Durability: bus.Replicated, Timeout: 20 * time.Millisecond}
	_, err = b.Extend(ctx, old, &bus.ExtendOpts{Ack: ack})
	require.ErrorIs(t, err, bus.ErrStale, "the stale holder must learn its lease is lost: %v", err)

	// The holder's extend applies, and the shortfall comes with its normal result.
	deadline, err := b.Extend(ctx, again[0], &bus.ExtendOpts{Ack: ack})
	require.ErrorIs(t, err, bus.ErrNotDurable)
	var ae *bus.AckError
	require.True(t, errors.As(err, &ae))
	require.False(t, deadline.IsZero(), "the deadline comes with the AckError")
}
