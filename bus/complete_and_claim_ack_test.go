package bus_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
)

// freshQueue is a queue name no other test and no other run of this test (-count>1) uses.
func freshQueue(t *testing.T) string {
	t.Helper()
	name := valkeytest.TestName(t)
	if len(name) > 50 {
		name = name[:50]
	}
	var r [6]byte
	_, _ = rand.Read(r[:])
	return name + "." + hex.EncodeToString(r[:])
}

// shortAck is an acknowledgement the shared standalone server (no replicas) never gives:
// every write that asks for it answers an *AckError after 1 ms, the write applied.
var shortAck = bus.Ack{Durability: bus.Replicated, Replicas: 1, Timeout: time.Millisecond}

// TestCompleteAndClaimShortAckPaused: a complete-and-claim with an acknowledgement that falls
// short, on a paused queue: the complete is applied, and the error says both what the claim
// met (ErrPaused) and that the write is not durable, not that the reply made no sense.
func TestCompleteAndClaimShortAckPaused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBus(t, valkeytest.Shared(t).Client(t), bus.Config{})
	name := freshQueue(t)
	_, err := b.EnqueueBatch(ctx, name, payloads(2, "p"), nil)
	require.NoError(t, err)
	jobs, err := b.Claim(ctx, name, nil)
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.NoError(t, b.Pause(ctx, name))

	next, err := b.CompleteAndClaim(ctx, jobs[0], &bus.ClaimOpts{Ack: shortAck})
	require.ErrorIs(t, err, bus.ErrPaused)
	require.ErrorIs(t, err, bus.ErrNotDurable, "the complete was applied but not acknowledged")
	require.NotErrorIs(t, err, bus.ErrProtocol)
	require.Empty(t, next)
	_, err = b.Lookup(ctx, name, jobs[0].ID)
	require.ErrorIs(t, err, bus.ErrNotFound, "the complete retired the job")
}

// TestCompleteAndClaimShortAckLanes: a Bus that has not seen the queue's lanes completes and
// claims with an acknowledgement that falls short: the claim goes through the lanes and
// returns the next job, with the *AckError.
func TestCompleteAndClaimShortAckLanes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := valkeytest.Shared(t).Client(t)
	producer := newBus(t, c, bus.Config{})
	name := freshQueue(t)
	_, err := producer.EnqueueBatch(ctx, name, payloads(2, "l"), &bus.EnqueueOpts{Lane: "tenant"})
	require.NoError(t, err)
	jobs, err := producer.Claim(ctx, name, nil)
	require.NoError(t, err)
	require.Len(t, jobs, 1)

	fresh := newBus(t, c, bus.Config{}) // it learns of the lanes from the claim's EMQLANES
	next, err := fresh.CompleteAndClaim(ctx, jobs[0], &bus.ClaimOpts{Ack: shortAck})
	require.ErrorIs(t, err, bus.ErrNotDurable)
	require.NotErrorIs(t, err, bus.ErrProtocol)
	require.Len(t, next, 1, "the claim went through the lanes")
	require.Equal(t, "tenant", next[0].Lane)
	_, err = producer.Lookup(ctx, name, jobs[0].ID)
	require.ErrorIs(t, err, bus.ErrNotFound, "the complete retired the job")
}
