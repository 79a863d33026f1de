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

// TestBadOptionsNamed: a refused option is named in the error, with its value, so the caller
// knows which of a call's fields to mend; and nothing is written.
func TestBadOptionsNamed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := valkeytest.Shared(t).Client(t)
	b := newBus(t, c, bus.Config{})
	name := freshQueue(t)
	j := bus.Job{Queue: name, ID: keys.NewJobID(), Token: 1}
	for _, tc := range []struct {
		name, want string
		call       func() error
	}{
		{"delay", "Delay -1s", func() error {
			_, err := b.Enqueue(ctx, name, []byte("x"), &bus.EnqueueOpts{Delay: -time.Second})
			return err
		}},
		{"unique ttl", "UniqueTTL -1ms", func() error {
			_, err := b.Enqueue(ctx, name, []byte("x"), &bus.EnqueueOpts{UniqueTTL: -time.Millisecond})
			return err
		}},
		{"count", "Count -2", func() error { _, err := b.Claim(ctx, name, &bus.ClaimOpts{Count: -2}); return err }},
		{"lease", "Lease -1s", func() error { _, err := b.Claim(ctx, name, &bus.ClaimOpts{Lease: -time.Second}); return err }},
		{"backoff", "Backoff -1m0s", func() error { _, err := b.Fail(ctx, j, &bus.FailOpts{Backoff: -time.Minute}); return err }},
		{"max attempts", "MaxAttempts -3", func() error { _, err := b.Fail(ctx, j, &bus.FailOpts{MaxAttempts: -3}); return err }},
		{"durability", "Durability(7)", func() error {
			_, err := b.Enqueue(ctx, name, []byte("x"), &bus.EnqueueOpts{Ack: bus.Ack{Durability: 7}})
			return err
		}},
		{"replicas", "Replicas -1", func() error {
			_, err := b.Enqueue(ctx, name, []byte("x"), &bus.EnqueueOpts{Ack: bus.Ack{Durability: bus.Replicated, Replicas: -1}})
			return err
		}},
		{"ack timeout", "Timeout -1s", func() error {
			_, err := b.Claim(ctx, name, &bus.ClaimOpts{Ack: bus.Ack{Durability: bus.Persisted, Timeout: -time.Second}})
			return err
		}},
	} {
		err := tc.call()
		require.ErrorIs(t, err, bus.ErrInvalid, tc.name)
		require.ErrorContains(t, err, tc.want, tc.name)
	}
	require.Empty(t, scanAll(t, c, "{"+name+"}"), "nothing was written")
}

// TestZeroJobIDMatchesKeysErrInvalid: the zero JobID is an invalid id, and errors about ids
// match keys.ErrInvalid as well as bus.ErrInvalid (package doc, ErrInvalid).
func TestZeroJobIDMatchesKeysErrInvalid(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBus(t, valkeytest.Shared(t).Client(t), bus.Config{})
	name := freshQueue(t)
	zero := bus.Job{Queue: name, Token: 1}
	for verb, err := range map[string]error{
		"complete": b.Complete(ctx, zero, nil),
		"fail":     second(b.Fail(ctx, zero, nil)),
		"snooze":   second(b.Snooze(ctx, zero, 0, nil)),
		"many":     second(b.CompleteMany(ctx, []bus.Job{zero}, nil)),
		"lookup":   second(b.Lookup(ctx, name, keys.JobID{})),
	} {
		require.ErrorIs(t, err, bus.ErrInvalid, verb)
		require.ErrorIs(t, err, keys.ErrInvalid, verb)
		require.ErrorContains(t, err, "not branded", verb)
	}
}
