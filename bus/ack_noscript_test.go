package bus_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// noScriptAckTimeout is the wait of the acknowledged writes below: long beside the cron tick
// that ends a blocked WAIT (100 ms). One wait and two are told apart by the server's count of
// WAIT commands; the time a call took is only logged: under -race on a loaded machine a call
// that waited once took up to 1.8 s, more than two waits' 1 s, so time cannot tell them apart.
const noScriptAckTimeout = 500 * time.Millisecond

// waitCalls is how many WAIT commands srv has run (INFO commandstats).
func waitCalls(t *testing.T, srv *valkeytest.Server) int64 {
	t.Helper()
	info, err := srv.Do(context.Background(), "INFO", "commandstats")
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_wait:")
		if !ok {
			continue
		}
		v, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		n, err := strconv.ParseInt(v, 10, 64)
		require.NoError(t, err)
		return n
	}
	return 0
}

// ackedEnqueue enqueues one job to name with ack, which no server can meet, and checks what
// the docs promise of a short acknowledgement: an *AckError with the job's id. It returns how
// long the call took.
func ackedEnqueue(t *testing.T, b *bus.Bus, name string, ack bus.Ack) time.Duration {
	t.Helper()
	start := time.Now()
	e, err := b.Enqueue(context.Background(), name, []byte("x"), &bus.EnqueueOpts{Ack: ack})
	took := time.Since(start)
	require.ErrorIs(t, err, bus.ErrNotDurable, "the job was applied and not acknowledged")
	var ae *bus.AckError
	require.True(t, errors.As(err, &ae))
	require.Nil(t, ae.Err, "the wait ran to its timeout: %v", err)
	require.False(t, e.ID.IsZero(), "the job's id comes with the AckError")
	return took
}

// TestAckNoScriptWaitsOnce: an acknowledged enqueue to a server that holds no script (SCRIPT
// FLUSH, as after a restart) waits for its acknowledgement once. Sent by EVALSHA with its
// WAIT in one round trip, the script is answered NOSCRIPT, the WAIT runs to its timeout
// covering nothing, and the script sent again by EVAL is followed by a second WAIT: the call
// took twice its timeout. The job is written once all the same.
func TestAckNoScriptWaitsOnce(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Start(t, valkeytest.WithoutPersistence())
	ctx := context.Background()
	b := newBus(t, srv.Client(t), bus.Config{})
	name := valkeytest.TestName(t)
	_, err := srv.Do(ctx, "SCRIPT", "FLUSH")
	require.NoError(t, err)
	before := waitCalls(t, srv)

	// No replica exists: the wait always runs to its timeout.
	ack := bus.Ack{Durability: bus.Replicated, Replicas: 1, Timeout: noScriptAckTimeout}
	took := ackedEnqueue(t, b, name, ack)
	require.Equal(t, int64(1), waitCalls(t, srv)-before, "one WAIT for one acknowledged write")
	t.Logf("the call took %v (one wait: %v)", took, noScriptAckTimeout)
	counts, err := b.Counts(ctx, name)
	require.NoError(t, err)
	require.EqualValues(t, 1, counts.Pending, "the job was written once")
}

// TestAckStaleScriptCache: a Bus that learned its scripts are loaded, on a server that then
// forgot them (SCRIPT FLUSH), is answered NOSCRIPT once: that write may wait twice, but it is
// applied once and returns its reply, and the next acknowledged write waits once again.
func TestAckStaleScriptCache(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Start(t, valkeytest.WithoutPersistence())
	ctx := context.Background()
	b := newBus(t, srv.Client(t), bus.Config{})
	name := valkeytest.TestName(t)
	ack := bus.Ack{Durability: bus.Replicated, Replicas: 1, Timeout: noScriptAckTimeout}

	before := waitCalls(t, srv)
	ackedEnqueue(t, b, name, ack) // the Bus learns that enqueue is loaded
	require.Equal(t, int64(1), waitCalls(t, srv)-before)

	_, err := srv.Do(ctx, "SCRIPT", "FLUSH")
	require.NoError(t, err)
	ackedEnqueue(t, b, name, ack) // stale: NOSCRIPT, then EVAL
	counts, err := b.Counts(ctx, name)
	require.NoError(t, err)
	require.EqualValues(t, 2, counts.Pending, "each job was written once")

	before = waitCalls(t, srv)
	took := ackedEnqueue(t, b, name, ack)
	require.Equal(t, int64(1), waitCalls(t, srv)-before, "loaded again: one WAIT")
	t.Logf("the call took %v (one wait: %v)", took, noScriptAckTimeout)
	counts, err = b.Counts(ctx, name)
	require.NoError(t, err)
	require.EqualValues(t, 3, counts.Pending)
}

// TestAckNoScriptWaitsOnceCluster: on a cluster each node caches scripts of its own, so a
// script that ran on one primary is not loaded on another. Acknowledged enqueues to queues on
// two primaries of a fresh cluster (no script loaded anywhere) each wait once, on their own
// node; the second, too, though the Bus ran the same script on the first node.
func TestAckNoScriptWaitsOnceCluster(t *testing.T) {
	t.Parallel()
	cl := valkeytest.StartCluster(t)
	b := newBus(t, cl.Client(t), bus.Config{})
	// Each primary has one replica: two can never acknowledge.
	ack := bus.Ack{Durability: bus.Replicated, Replicas: 2, Timeout: noScriptAckTimeout}

	names := map[*valkeytest.Server]string{}
	base := valkeytest.TestName(t)
	for i := 0; len(names) < 2; i++ {
		name := base + "." + strconv.Itoa(i)
		p := cl.PrimaryForSlot(keys.Slot(keys.MustQueue(name).Pending()))
		require.NotNil(t, p)
		if _, ok := names[p]; !ok {
			names[p] = name
		}
	}
	for p, name := range names {
		before := waitCalls(t, p)
		took := ackedEnqueue(t, b, name, ack)
		require.Equal(t, int64(1), waitCalls(t, p)-before, "one WAIT on %s for one acknowledged write", p.Addr)
		t.Logf("%s: the call took %v (one wait: %v)", p.Addr, took, noScriptAckTimeout)
		counts, err := b.Counts(context.Background(), name)
		require.NoError(t, err)
		require.EqualValues(t, 1, counts.Pending, "the job was written once")
	}
}
