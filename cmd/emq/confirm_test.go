package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// slowAnswer is an operator at a terminal: the answer comes after delay, and before runs
// just before it is typed.
type slowAnswer struct {
	delay  time.Duration
	before func()
	answer string
	done   bool
}

func (s *slowAnswer) Read(p []byte) (int, error) {
	if !s.done {
		time.Sleep(s.delay)
		if s.before != nil {
			s.before()
		}
		s.done = true
	}
	n := copy(p, s.answer)
	s.answer = s.answer[n:]
	if n == 0 {
		return 0, os.ErrClosed
	}
	return n, nil
}

// runAtTerminal runs the tool in process against srv with in as a terminal's stdin.
func runAtTerminal(srv *valkeytest.Server, in *slowAnswer, args ...string) (code int, stderr string) {
	var out, errb bytes.Buffer
	a := &app{in: in, out: &out, err: &errb, isTTY: func() bool { return true },
		getenv: func(k string) string {
			if k == "VALKEY_ADDR" {
				return srv.Addr
			}
			return ""
		}}
	return a.run(args), errb.String()
}

// TestConfirmAfterTimeout: --timeout bounds the round trips, not the operator: a drop
// answered after the deadline the reads before the prompt ran under still drops (it failed
// with exit 4, "context deadline exceeded", when one deadline covered both).
func TestConfirmAfterTimeout(t *testing.T) {
	t.Parallel()
	srv, b, queue := sharedQueue(t)
	_, err := b.Enqueue(context.Background(), queue, []byte("x"), nil)
	require.NoError(t, err)
	code, stderr := runAtTerminal(srv, &slowAnswer{delay: 1500 * time.Millisecond, answer: "y\n"}, "--timeout", "1s", "drop", queue)
	require.Equal(t, exitOK, code, stderr)
	require.Contains(t, stderr, "[y/N]")
	cs, err := b.Counts(context.Background(), queue)
	require.NoError(t, err)
	require.Equal(t, bus.Counts{}, cs)
}

// TestAllActsOnConfirmedSet: retry --all and purge --all act on the dead jobs the operator
// confirmed. A job that dies while the prompt waits, with an id older than theirs, is left
// dead; it used to be taken in place of a confirmed one, which stayed dead.
func TestAllActsOnConfirmedSet(t *testing.T) {
	t.Parallel()
	for _, verb := range []string{"retry", "purge"} {
		t.Run(verb, func(t *testing.T) {
			t.Parallel()
			srv, b, queue := sharedQueue(t)
			ctx := context.Background()
			ids := enqueueApart(t, b, queue, 3)
			js, err := b.Claim(ctx, queue, &bus.ClaimOpts{Count: 3})
			require.NoError(t, err)
			require.Len(t, js, 3)
			held := map[keys.JobID]bus.Job{}
			for _, j := range js {
				held[j.ID] = j
			}
			kill := func(id keys.JobID) {
				_, err := b.Fail(ctx, held[id], &bus.FailOpts{MaxAttempts: 1, Error: "x"})
				require.NoError(t, err)
			}
			kill(ids[1])
			kill(ids[2])
			late := &slowAnswer{delay: 50 * time.Millisecond, answer: "y\n", before: func() { kill(ids[0]) }}
			code, stderr := runAtTerminal(srv, late, verb, queue, "--all")
			require.Equal(t, exitOK, code, stderr)
			require.Contains(t, stderr, verb+" all 2 dead jobs of "+queue)
			for _, id := range ids[1:] {
				info, err := b.Lookup(ctx, queue, id)
				if verb == "purge" {
					require.ErrorIs(t, err, bus.ErrNotFound, "confirmed and purged")
				} else {
					require.NoError(t, err)
					require.Equal(t, bus.StatePending, info.State, "confirmed and retried")
				}
			}
			info, err := b.Lookup(ctx, queue, ids[0])
			require.NoError(t, err)
			require.Equal(t, bus.StateDead, info.State, "it died after the prompt: not confirmed")
		})
	}
}

// TestDevNullIsNotATerminal: /dev/null (the stdin of cron, systemd, ssh -n) is a character
// device but not a terminal: a destructive command refuses with the hint to pass --yes
// instead of printing a prompt nobody answers.
func TestDevNullIsNotATerminal(t *testing.T) {
	t.Parallel()
	f, err := os.Open(os.DevNull)
	require.NoError(t, err)
	defer f.Close()
	require.False(t, isTerminal(f))
	require.False(t, isTerminal(strings.NewReader("y\n")))
}
