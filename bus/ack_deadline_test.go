package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
)

// TestAckWaitWithinContextDeadline: an enqueue asks for a replica's acknowledgement with a
// wait (5 s) longer than its context has left (300 ms), and no replica answers. The job is
// applied on the primary, so the call must say so as the docs promise: an *AckError
// (ErrNotDurable) together with the job's id. valkey-go fails a whole pipeline at the
// context's deadline, the script's reply included, so a WAIT that outlives the context turns
// an applied write into a bare context error with no id, and a caller that retries on it
// enqueues the job twice. The wait asked of the server must end before the context does.
func TestAckWaitWithinContextDeadline(t *testing.T) {
	t.Parallel()
	b := newBus(t, valkeytest.Shared(t).Client(t), bus.Config{})
	name := freshQueue(t)
	_, err := b.Enqueue(context.Background(), name, []byte("warm"), nil) // the script is loaded
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	e, err := b.Enqueue(ctx, name, []byte("x"), &bus.EnqueueOpts{Ack: bus.Ack{Durability: bus.Replicated, Timeout: 5 * time.Second}})
	counts, cerr := b.Counts(context.Background(), name)
	require.NoError(t, cerr)
	require.EqualValues(t, 2, counts.Pending, "the job was applied on the primary")
	require.ErrorIs(t, err, bus.ErrNotDurable, "an applied write that was not acknowledged is an *AckError")
	require.False(t, e.ID.IsZero(), "with the job's id")
}

// TestAckWaitCancelled: the same with a context that has no deadline and is cancelled while
// the write waits for its acknowledgement: the job was applied, so the call answers an
// *AckError carrying the cancellation, with the job's id, and returns soon after the cancel.
func TestAckWaitCancelled(t *testing.T) {
	t.Parallel()
	b := newBus(t, valkeytest.Shared(t).Client(t), bus.Config{})
	name := freshQueue(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	e, err := b.Enqueue(ctx, name, []byte("x"), &bus.EnqueueOpts{Ack: bus.Ack{Durability: bus.Replicated, Timeout: 5 * time.Second}})
	require.Less(t, time.Since(start), 4*time.Second, "the cancel ends the wait")
	counts, cerr := b.Counts(context.Background(), name)
	require.NoError(t, cerr)
	require.EqualValues(t, 1, counts.Pending, "the job was applied on the primary")
	require.ErrorIs(t, err, bus.ErrNotDurable)
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, e.ID.IsZero(), "with the job's id")
}
