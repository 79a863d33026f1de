package main

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
)

func TestRetryAndPurge(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Shared(t)
	s := seed(t, srv)
	ctx := context.Background()

	// Destructive without --yes and without a terminal: refused, nothing changed.
	r := emq(t, srv.Addr, "retry", s.queue, "--all")
	require.Equal(t, exitRefused, r.code, r.err)
	require.Contains(t, r.err, "pass --yes")
	r = emq(t, srv.Addr, "purge", s.queue, s.dead[0].String())
	require.Equal(t, exitRefused, r.code, r.err)
	c, err := s.b.Counts(ctx, s.queue)
	require.NoError(t, err)
	require.Equal(t, int64(2), c.Dead)

	// Purge one by id, then retry the other with --all.
	var ch changed
	okJSON(t, srv.Addr, &ch, "purge", s.queue, s.dead[0].String(), "--yes")
	require.Equal(t, changed{Queue: s.queue, Action: "purged", IDs: []string{s.dead[0].String()}, Count: 1}, ch)
	_, err = s.b.Lookup(ctx, s.queue, s.dead[0])
	require.ErrorIs(t, err, bus.ErrNotFound)

	require.Equal(t, s.queue+": retried 1 jobs\n", ok(t, srv.Addr, "retry", s.queue, "--all", "--yes"))
	info, err := s.b.Lookup(ctx, s.queue, s.dead[1])
	require.NoError(t, err)
	require.Equal(t, bus.StatePending, info.State)

	// Retrying a job that is not dead is refused (all or nothing); so is purging one.
	r = emq(t, srv.Addr, "retry", s.queue, s.pending[0].String())
	require.Equal(t, exitRefused, r.code, r.err)
	r = emq(t, srv.Addr, "purge", s.queue, s.pending[0].String(), "--yes")
	require.Equal(t, exitRefused, r.code, r.err)

	// Neither ids nor --all, or both: a usage error.
	require.Equal(t, exitUsage, emq(t, srv.Addr, "retry", s.queue).code)
	require.Equal(t, exitUsage, emq(t, srv.Addr, "purge", s.queue, s.pending[0].String(), "--all", "--yes").code)
}

func TestPurgeAll(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Shared(t)
	s := seed(t, srv)
	var ch changed
	okJSON(t, srv.Addr, &ch, "purge", s.queue, "--all", "--yes")
	require.Equal(t, 2, ch.Count)
	c, err := s.b.Counts(context.Background(), s.queue)
	require.NoError(t, err)
	require.Zero(t, c.Dead)
}

func TestPauseResumeCancel(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Shared(t)
	s := seed(t, srv)
	ctx := context.Background()

	// Cancel a pending and the scheduled job: deleted, with the state they had.
	var ch changed
	okJSON(t, srv.Addr, &ch, "cancel", s.queue, s.pending[2].String())
	require.Equal(t, "pending", ch.State)
	require.Equal(t, s.queue+": cancelled "+s.scheduled.String()+" (was scheduled)\n",
		ok(t, srv.Addr, "cancel", s.queue, s.scheduled.String()))
	require.Equal(t, exitNotFound, emq(t, srv.Addr, "cancel", s.queue, s.scheduled.String()).code)

	require.Equal(t, s.queue+": paused\n", ok(t, srv.Addr, "pause", s.queue))
	require.Equal(t, s.queue+": resumed\n", ok(t, srv.Addr, "resume", s.queue))
	// Resumed, the worker claims the two jobs left pending (it has no handler of email.send,
	// so it fails them into the schedule): pending empties.
	waitFor(t, "the resumed queue's pending jobs claimed", func() bool {
		c, err := s.b.Counts(ctx, s.queue)
		return err == nil && c.Pending == 0 && !c.Paused
	})
	okJSON(t, srv.Addr, &ch, "pause", s.queue)
	require.Equal(t, changed{Queue: s.queue, Action: "paused"}, ch)
	c, err := s.b.Counts(ctx, s.queue)
	require.NoError(t, err)
	require.True(t, c.Paused)
}

func TestEnqueue(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Shared(t)
	queue := valkeytest.TestName(t)

	// A new queue: the enqueue lists it.
	var e enqueued
	okJSON(t, srv.Addr, &e, "enqueue", queue, `{"n":1}`, "--kind", "count")
	require.Equal(t, "count", e.Kind)
	var j shownJob
	okJSON(t, srv.Addr, &j, "show", queue, e.ID)
	require.Equal(t, "count", j.Kind)
	require.JSONEq(t, `{"n":1}`, string(j.Args))

	// A task with a header block (the trace context): show decodes both.
	plain, err := bus.Envelope("traced", []byte(`{}`))
	require.NoError(t, err)
	payload, err := bus.WithHeaders(plain, bus.Header{Name: "traceparent", Value: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"})
	require.NoError(t, err)
	r := emqIn(t, srv.Addr, string(payload), "enqueue", queue, "-")
	require.Equal(t, 0, r.code, r.err)
	okJSON(t, srv.Addr, &j, "show", queue, strings.TrimSpace(r.out))
	require.Equal(t, "traced", j.Kind)
	require.Equal(t, map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}, j.Headers)
	require.Contains(t, lines(ok(t, srv.Addr, "show", queue, strings.TrimSpace(r.out))),
		"header traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")

	// From stdin, raw (no envelope), delayed.
	r = emqIn(t, srv.Addr, "plain bytes", "enqueue", queue, "-", "--delay", "1h")
	require.Equal(t, 0, r.code, r.err)
	id := r.out[:len(r.out)-1]
	okJSON(t, srv.Addr, &j, "show", queue, id)
	require.Empty(t, j.Kind)
	require.Equal(t, "scheduled", j.Set)
	require.NotNil(t, j.Text)
	require.Equal(t, "plain bytes", *j.Text)

	// Idempotent with a unique key.
	okJSON(t, srv.Addr, &e, "enqueue", queue, "x", "--unique-key", "k1")
	first := e.ID
	okJSON(t, srv.Addr, &e, "enqueue", queue, "y", "--unique-key", "k1")
	require.True(t, e.Duplicate)
	require.Equal(t, first, e.ID)

	// In a lane, urgent: show names both.
	okJSON(t, srv.Addr, &e, "enqueue", queue, "z", "--lane", "acme", "--priority", "2")
	okJSON(t, srv.Addr, &j, "show", queue, e.ID)
	require.Equal(t, "acme", j.Lane)
	require.Equal(t, 2, j.Priority)
	require.Equal(t, "urgent", j.Set)
	require.Contains(t, lines(ok(t, srv.Addr, "show", queue, e.ID)), "lane: acme")
	r = emq(t, srv.Addr, "enqueue", queue, "x", "--lane", "bad lane")
	require.Equal(t, exitUsage, r.code, r.err)
	require.Contains(t, r.err, "lane")
	r = emq(t, srv.Addr, "enqueue", queue, "x", "--priority", "4")
	require.Equal(t, exitUsage, r.code, r.err)
	require.Contains(t, r.err, "Priority")

	var rows []queueStats
	okJSON(t, srv.Addr, &rows, "stats", queue)
	require.Equal(t, int64(4), rows[0].Pending, "the urgent job of acme waits too")
	require.Equal(t, int64(1), rows[0].Scheduled)

	require.Equal(t, exitUsage, emq(t, srv.Addr, "enqueue", queue, "x", "--kind", "bad kind").code)
	require.Equal(t, exitUsage, emq(t, srv.Addr, "enqueue", queue, "x", "--at", "tomorrow").code)
	r = emq(t, srv.Addr, "enqueue", queue, "x", "--delay", "1h", "--at", "2030-01-01T00:00:00Z")
	require.Equal(t, exitUsage, r.code, "two schedules for one job: %s", r.err)
	require.Contains(t, r.err, "--delay and --at")
	okJSON(t, srv.Addr, &rows, "stats", queue)
	require.Equal(t, int64(1), rows[0].Scheduled, "the refused enqueue wrote nothing")
}
