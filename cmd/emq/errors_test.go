package main

import (
	"bytes"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

func TestUnreachableServer(t *testing.T) {
	t.Parallel()
	// A port that was free a moment ago: nothing listens there.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())

	start := time.Now()
	r := emq(t, addr, "queues", "--connect-timeout", "500ms")
	took := time.Since(start)
	require.Equal(t, exitUnreachable, r.code, r.err)
	require.Contains(t, r.err, addr)
	require.Less(t, took, 5*time.Second)

	r = emq(t, addr, "stats", "--json", "--connect-timeout", "500ms")
	require.Equal(t, exitUnreachable, r.code)
	var je jsonError
	require.NoError(t, json.Unmarshal([]byte(r.err), &je), r.err)
	require.Equal(t, exitUnreachable, je.Exit)
	require.Contains(t, je.Error, addr)

	// A server that accepts and never answers (a stopped process): bounded too.
	hang, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer hang.Close()
	go func() {
		for {
			c, err := hang.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	start = time.Now()
	r = emq(t, hang.Addr().String(), "queues", "--connect-timeout", "500ms")
	require.Equal(t, exitUnreachable, r.code, r.err)
	require.Contains(t, r.err, hang.Addr().String())
	require.Less(t, time.Since(start), 5*time.Second)
}

func TestNotFound(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Shared(t)
	s := seed(t, srv)
	unknown := valkeytest.TestName(t) + "-nope"
	for _, args := range [][]string{
		{"stats", unknown}, {"ls", unknown, "pending"}, {"show", unknown, s.pending[0].String()},
		{"pause", unknown}, {"resume", unknown}, {"retry", unknown, "--all", "--yes"},
		{"purge", unknown, "--all", "--yes"}, {"cancel", unknown, s.pending[0].String()},
		{"watch", unknown, "--count", "1"},
	} {
		r := emq(t, srv.Addr, args...)
		require.Equalf(t, exitNotFound, r.code, "emq %v: %s", args, r.err)
		require.Containsf(t, r.err, "queue "+unknown+" is not in the registry", "emq %v", args)
	}
	// A job id that has no row.
	r := emq(t, srv.Addr, "show", s.queue, keys.NewJobID().String())
	require.Equal(t, exitNotFound, r.code, r.err)
	require.Contains(t, r.err, "no such job")
	// A table that is not in the registry.
	r = emq(t, srv.Addr, "table", unknown)
	require.Equal(t, exitNotFound, r.code, r.err)
	require.Contains(t, r.err, "table "+unknown+" is not in the registry")
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Shared(t)
	s := seed(t, srv)
	for _, args := range [][]string{
		{"nosuchcommand"},
		{"queues", "--nosuchflag"},
		{"show", s.queue},
		{"show", s.queue, "not-a-job-id"},
		{"ls", s.queue, "everything"},
		{"ls", s.queue, "pending", "--since", "yesterday"},
		{"ls", s.queue, "pending", "--limit", "0"},
		{"stats", "bad{name}"},
		{"stats", "--window", "-1s"},
		{"watch", "--interval", "0s"},
	} {
		r := emq(t, srv.Addr, args...)
		require.Equalf(t, exitUsage, r.code, "emq %v: %s", args, r.err)
		require.Truef(t, strings.HasPrefix(r.err, "emq: "), "emq %v: %s", args, r.err)
	}
	// --cluster against a standalone server.
	r := emq(t, srv.Addr, "queues", "--cluster")
	require.Equal(t, exitUsage, r.code, r.err)
	require.Contains(t, r.err, "is not a cluster")
}

// TestFlagErrorNamesCommand: a flag error points at the help of the command that has the
// flag, not at a top-level command of the same name (emq pause is the queue's).
func TestFlagErrorNamesCommand(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Shared(t)
	for _, args := range [][]string{
		{"periodic", "pause", "q", "s", "--bogus"},
		{"lane", "pause", "q", "l", "--bogus"},
		{"periodic", "remove", "q", "s", "--bogus"},
	} {
		r := emq(t, srv.Addr, args...)
		require.Equalf(t, exitUsage, r.code, "emq %v: %s", args, r.err)
		require.Containsf(t, r.err, "(see emq "+args[0]+" "+args[1]+" --help)", "emq %v", args)
	}
}

// TestConfirmOnTerminal runs the tool in process with a stdin that reads as a terminal: it
// asks, and only "y" goes ahead.
func TestConfirmOnTerminal(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Shared(t)
	s := seed(t, srv)
	runTTY := func(answer string, args ...string) (int, string) {
		var out, errb bytes.Buffer
		a := &app{in: strings.NewReader(answer), out: &out, err: &errb, isTTY: func() bool { return true },
			getenv: func(k string) string {
				if k == "VALKEY_ADDR" {
					return srv.Addr
				}
				return ""
			}}
		return a.run(args), errb.String()
	}
	code, stderr := runTTY("n\n", "purge", s.queue, "--all")
	require.Equal(t, exitRefused, code)
	require.Contains(t, stderr, "purge all 2 dead jobs of "+s.queue+"? [y/N] ")
	require.Contains(t, stderr, "not confirmed")
	code, _ = runTTY("\n", "retry", s.queue, "--all")
	require.Equal(t, exitRefused, code)

	code, stderr = runTTY("y\n", "retry", s.queue, s.dead[0].String())
	require.Equal(t, exitOK, code, stderr) // retry by id asks nothing
	code, stderr = runTTY("yes\n", "purge", s.queue, "--all")
	require.Equal(t, exitOK, code, stderr)
	require.Contains(t, stderr, "purge all 1 dead jobs of "+s.queue+"? [y/N] ")
}

func TestWatch(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Shared(t)
	s := seed(t, srv)
	out := ok(t, srv.Addr, "watch", s.queue, "--json", "--count", "3", "--interval", "150ms")
	docs := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, docs, 3)
	for i, d := range docs {
		var f watchFrame
		require.NoError(t, json.Unmarshal([]byte(d), &f), d)
		require.Len(t, f.Queues, 1)
		require.Equal(t, int64(4), f.Queues[0].Completed)
		if i == 0 {
			require.Nil(t, f.Queues[0].Rates, "no rates before a second read")
		} else {
			require.NotNil(t, f.Queues[0].Rates)
		}
	}
	text := ok(t, srv.Addr, "watch", s.queue, "--count", "2", "--interval", "100ms")
	require.Equal(t, 2, strings.Count(strings.Join(lines(text), "\n"), "QUEUE PENDING ACTIVE"))
}
