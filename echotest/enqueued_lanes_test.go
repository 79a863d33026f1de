package echotest_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/echotest"
)

// TestEnqueuedLanesAndPriorities: a job enqueued in a lane waits in its lane's set and one of
// priority 1 to 3 in urgent, not in pending: Enqueued lists them with their lane and priority,
// RequireEnqueued finds them (in a given lane, with RequireOpts.Lane) and RequireNotEnqueued
// fails on them.
func TestEnqueuedLanesAndPriorities(t *testing.T) {
	t.Parallel()
	b := echotest.Valkey(t).Bus(t, nil)
	queue := echotest.Name(t)
	ctx := context.Background()
	enqueue := func(kind, to string, o bus.EnqueueOpts) bus.Enqueued {
		t.Helper()
		e, err := bus.EnqueueTask(ctx, b, queue, kind, email{To: to}, &bus.TaskOpts{EnqueueOpts: o})
		require.NoError(t, err)
		return e
	}
	plain := enqueue("email.send", "ada", bus.EnqueueOpts{})
	laned := enqueue("email.send", "bob", bus.EnqueueOpts{Lane: "acme"})
	urgent := enqueue("email.send", "carl", bus.EnqueueOpts{Priority: 2})
	both := enqueue("sms.send", "dora", bus.EnqueueOpts{Lane: "acme", Priority: 3})
	smsLane := enqueue("sms.send", "eve", bus.EnqueueOpts{Lane: "globex"})

	for to, id := range map[string]bus.Enqueued{"ada": plain, "bob": laned, "carl": urgent} {
		j := echotest.RequireEnqueued(t, b, queue, "email.send", email{To: to}, &echotest.RequireOpts{State: bus.StatePending})
		require.Equal(t, id.ID, j.ID, to)
	}
	require.Equal(t, both.ID, echotest.RequireEnqueued(t, b, queue, "sms.send", email{To: "dora"}, nil).ID)
	require.Equal(t, smsLane.ID, echotest.RequireEnqueued(t, b, queue, "sms.send", email{To: "eve"}, nil).ID)

	j := echotest.RequireEnqueued(t, b, queue, "sms.send", email{To: "dora"}, &echotest.RequireOpts{Lane: "acme"})
	require.Equal(t, "acme", j.Lane)
	require.Equal(t, 3, j.Priority)
	require.Contains(t, j.String(), " lane acme priority 3")
	msg := fails(t, func(tb testing.TB) {
		echotest.RequireEnqueued(tb, b, queue, "email.send", email{To: "bob"}, &echotest.RequireOpts{Lane: "globex"})
	})
	require.Contains(t, msg, "holds no waiting (lane globex) job of kind email.send")
	require.Contains(t, msg, "email.send({\"to\":\"bob\"}) lane acme", "the listing names each job's lane")

	msg = fails(t, func(tb testing.TB) { echotest.RequireNotEnqueued(tb, b, queue, "sms.send") })
	require.Contains(t, msg, "holds 2 waiting jobs of kind sms.send", "jobs of lanes are waiting jobs")
	require.Len(t, echotest.Enqueued(t, b, queue), 5)
}
