package bus_test

import (
	"context"
	"errors"
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
	name := valkeytest.TestName(t)
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

// TestDurabilityStandalone: on a server without replicas a Replicated write falls short and
// says so; Persisted is met by the AOF fsync, and refused (with the write applied) when the
// server has no AOF; an unknown level is refused before anything is written.
func TestDurabilityStandalone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		opts    []valkeytest.Option
		ack     bus.Ack
		wantErr error
		acked   bool // the wait was answered (not refused)
	}{
		{"replicated without replicas", nil, bus.Ack{Durability: bus.Replicated, Timeout: 50 * time.Millisecond}, bus.ErrNotDurable, true},
		{"persisted with AOF", nil, bus.Ack{Durability: bus.Persisted}, nil, true},
		{"persisted without AOF", []valkeytest.Option{valkeytest.WithoutPersistence()}, bus.Ack{Durability: bus.Persisted}, bus.ErrNotDurable, false},
		{"unknown level", nil, bus.Ack{Durability: 9}, bus.ErrInvalid, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var c = valkeytest.Shared(t).Client(t)
			if tc.opts != nil {
				c = valkeytest.Start(t, tc.opts...).Client(t)
			}
			b := newBus(t, c, bus.Config{})
			name := valkeytest.TestName(t)
			enq, err := b.Enqueue(ctx, name, []byte("x"), &bus.EnqueueOpts{Ack: tc.ack})
			if tc.wantErr == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tc.wantErr)
			}
			counts, cerr := b.Counts(ctx, name)
			require.NoError(t, cerr)
			if errors.Is(err, bus.ErrInvalid) {
				require.Equal(t, bus.Counts{}, counts, "refused before the write")
				return
			}
			require.False(t, enq.ID.IsZero())
			require.Equal(t, int64(1), counts.Pending, "the write was applied on the primary")
			var ae *bus.AckError
			if errors.As(err, &ae) {
				require.Equal(t, tc.acked, ae.Err == nil, "%v", err)
				require.Contains(t, err.Error(), "may still exist")
			}
		})
	}
}
