package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// TestDurability: on a cluster, a Replicated write returns when the queue's replica
// acknowledged it; with that replica stopped (SIGSTOP), a Replicated enqueue returns the
// shortfall error within its timeout, and the job exists on the primary all the same.
// Persisted (WAITAOF) is met by the primary's own fsync and falls short when it also asks for
// the stopped replica.
func TestDurability(t *testing.T) {
	t.Parallel()
	cluster := valkeytest.StartCluster(t)
	c := cluster.Client(t)
	b := newBus(t, c, bus.Config{})
	ctx := context.Background()
	name := uniqueName(t)
	q := keys.MustQueue(name)

	primary := cluster.PrimaryForSlot(keys.Slot(q.Pending()))
	require.NotNil(t, primary)
	replicas := cluster.ReplicasOf(primary)
	require.Len(t, replicas, 1)
	replica := replicas[0]

	replicated := &bus.EnqueueOpts{Ack: bus.Ack{Durability: bus.Replicated, Timeout: 5 * time.Second}}
	_, err := b.Enqueue(ctx, name, []byte("acked"), replicated)
	require.NoError(t, err, "the replica is up: WAIT 1 is met")
	_, err = b.Claim(ctx, name, &bus.ClaimOpts{Ack: bus.Ack{Durability: bus.Replicated, Timeout: 5 * time.Second}})
	require.NoError(t, err, "a replicated claim")
	_, err = b.Enqueue(ctx, name, []byte("fsynced"), &bus.EnqueueOpts{Ack: bus.Ack{Durability: bus.Persisted, Timeout: 5 * time.Second}})
	require.NoError(t, err, "WAITAOF 1 0: the primary fsyncs its AOF")

	require.NoError(t, replica.Stop())
	t.Cleanup(func() { _ = replica.Continue() })

	const timeout = 300 * time.Millisecond
	for _, tc := range []struct {
		name string
		ack  bus.Ack
	}{
		{"replicated", bus.Ack{Durability: bus.Replicated, Timeout: timeout}},
		{"persisted on a replica", bus.Ack{Durability: bus.Persisted, Replicas: 1, Timeout: timeout}},
	} {
		start := time.Now()
		enq, err := b.Enqueue(ctx, name, []byte(tc.name), &bus.EnqueueOpts{Ack: tc.ack})
		elapsed := time.Since(start)
		require.ErrorIs(t, err, bus.ErrNotDurable, tc.name)
		var ae *bus.AckError
		require.ErrorAs(t, err, &ae, tc.name)
		require.Equal(t, 1, ae.Wanted, tc.name)
		require.Equal(t, 0, ae.Acked, tc.name)
		require.Contains(t, err.Error(), "may still exist", tc.name)
		require.GreaterOrEqual(t, elapsed, timeout-50*time.Millisecond, "%s: the server waited its timeout", tc.name)
		require.Less(t, elapsed, timeout+5*time.Second, "%s: returned within its timeout (plus slack for a loaded machine)", tc.name)
		if tc.ack.Durability == bus.Persisted {
			require.True(t, ae.LocalAOF, "the primary fsynced")
		}

		// The write exists on the primary: the error says so, and the job is there.
		require.False(t, enq.ID.IsZero(), tc.name)
		info, err := b.Lookup(ctx, name, enq.ID)
		require.NoError(t, err, tc.name)
		require.Equal(t, bus.StatePending, info.State, tc.name)
	}
}
