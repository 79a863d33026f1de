package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/internal/valkeytest"
)

// TestConfig: emq config reads a queue's settings, sets those given (the bus then uses them:
// dead keeps its newest jobs), clears them with 0, and refuses a negative value or an unknown
// queue before it writes.
func TestConfig(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Shared(t)
	s := seed(t, srv)
	ctx := context.Background()

	require.Equal(t, s.queue+": max attempts none of its own (the bus default, 25 unless configured), dead limit none (every dead job is kept)\n",
		ok(t, srv.Addr, "config", s.queue))
	var cfg queueConfig
	okJSON(t, srv.Addr, &cfg, "config", s.queue, "--dead-limit", "1", "--max-attempts", "3")
	require.Equal(t, queueConfig{Queue: s.queue, MaxAttempts: 3, DeadLimit: 1}, cfg)
	c, err := s.b.Counts(ctx, s.queue)
	require.NoError(t, err)
	require.Equal(t, 3, c.MaxAttempts)
	require.Equal(t, 1, c.DeadLimit)

	// Only the flag given changes.
	require.Equal(t, s.queue+": max attempts 3, dead limit none (every dead job is kept)\n",
		ok(t, srv.Addr, "config", s.queue, "--dead-limit", "0"))

	var rows []queueRow
	okJSON(t, srv.Addr, &rows, "queues")
	found := false
	for _, r := range rows {
		if r.Name == s.queue {
			found = true
			require.Equal(t, 3, r.MaxAttempts)
			require.Zero(t, r.DeadLimit)
		}
	}
	require.True(t, found)

	require.Equal(t, exitUsage, emq(t, srv.Addr, "config", s.queue, "--dead-limit", "-1").code)
	require.Equal(t, exitUsage, emq(t, srv.Addr, "config", s.queue, "--max-attempts", "-2").code)
	require.Equal(t, exitNotFound, emq(t, srv.Addr, "config", "no-such-queue", "--dead-limit", "5").code)
	c, err = s.b.Counts(ctx, s.queue)
	require.NoError(t, err)
	require.Equal(t, 3, c.MaxAttempts)
	require.Zero(t, c.DeadLimit)
}
