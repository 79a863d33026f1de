package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/internal/valkeytest"
)

func TestQueues(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Shared(t)
	s := seed(t, srv)

	var rows []queueRow
	okJSON(t, srv.Addr, &rows, "queues")
	var got *queueRow
	for i := range rows {
		if rows[i].Name == s.queue {
			got = &rows[i]
		}
	}
	require.NotNil(t, got, "emq queues lists %s", s.queue)
	require.Equal(t, queueRow{Name: s.queue, FirstSeen: got.FirstSeen, Pending: 3, Scheduled: 1, Dead: 2, Paused: true}, *got)
	require.False(t, got.FirstSeen.IsZero())

	text := lines(ok(t, srv.Addr, "queues"))
	require.Equal(t, "QUEUE PENDING ACTIVE SCHEDULED DEAD PAUSED FIRST SEEN", text[0])
	require.Contains(t, text, fmt.Sprintf("%s 3 0 1 2 yes %s", s.queue, fmtTime(got.FirstSeen)))
}

func TestStats(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Shared(t)
	s := seed(t, srv)

	var rows []queueStats
	okJSON(t, srv.Addr, &rows, "stats", s.queue)
	require.Len(t, rows, 1)
	r := rows[0]
	require.Equal(t, s.queue, r.Queue)
	require.Equal(t, [4]int64{3, 0, 1, 2}, [4]int64{r.Pending, r.Active, r.Scheduled, r.Dead})
	require.True(t, r.Paused)
	require.Equal(t, 1, r.Workers)
	require.Equal(t, 2, r.Concurrency)
	require.Equal(t, int64(6), r.Claimed)
	require.Equal(t, int64(4), r.Completed)
	require.Equal(t, int64(2), r.Failed)
	require.Equal(t, int64(2), r.DeadJobs)
	require.Zero(t, r.Retried)
	require.Zero(t, r.Cancelled)
	require.Nil(t, r.Rates, "no rates without --window")

	text := lines(ok(t, srv.Addr, "stats", s.queue))
	require.Equal(t, []string{
		"QUEUE PENDING ACTIVE SCHEDULED DEAD PAUSED WORKERS RUNNING CLAIMED COMPLETED FAILED RETRIED DEAD JOBS STALE LEASE LOST CANCELLED",
		s.queue + " 3 0 1 2 yes 1 (2 slots) 0 6 4 2 0 2 0 0 0",
	}, text)

	// With a window longer than the worker's report interval the rates cover the worker,
	// and an idle (paused) queue's rates are zero.
	okJSON(t, srv.Addr, &rows, "stats", s.queue, "--window", "300ms")
	require.NotNil(t, rows[0].Rates)
	require.Equal(t, 1, rows[0].Rates.Workers)
	require.Zero(t, rows[0].Rates.Completed)
	require.Greater(t, rows[0].Rates.WindowMS, 0.0)
	text = lines(ok(t, srv.Addr, "stats", s.queue, "--window", "300ms"))
	require.True(t, strings.HasSuffix(text[0], "COMPLETED/S FAILED/S"), text[0])
	require.True(t, strings.HasSuffix(text[1], "0.0/s 0.0/s"), text[1])

	// Without a queue, every queue of the registry, the seeded one among them.
	okJSON(t, srv.Addr, &rows, "stats")
	found := false
	for _, r := range rows {
		found = found || r.Queue == s.queue && r.Completed == 4
	}
	require.True(t, found)
}

func TestLs(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Shared(t)
	s := seed(t, srv)

	var l listing
	okJSON(t, srv.Addr, &l, "ls", s.queue, "pending")
	require.Equal(t, idStrings(s.pending), listedIDs(l))
	require.Empty(t, l.Next)
	require.Equal(t, s.pending[0].Time().UnixMilli(), l.Jobs[0].Minted.UnixMilli())

	okJSON(t, srv.Addr, &l, "ls", s.queue, "pending", "--newest", "--limit", "2")
	require.Equal(t, []string{s.pending[2].String(), s.pending[1].String()}, listedIDs(l))
	require.Equal(t, s.pending[1].String(), l.Next)
	okJSON(t, srv.Addr, &l, "ls", s.queue, "pending", "--newest", "--limit", "2", "--after", l.Next)
	require.Equal(t, []string{s.pending[0].String()}, listedIDs(l))
	require.Empty(t, l.Next)

	okJSON(t, srv.Addr, &l, "ls", s.queue, "dead")
	require.Equal(t, idStrings(s.dead), listedIDs(l))

	// A mint-time range: nothing minted in the future, everything since an hour ago.
	okJSON(t, srv.Addr, &l, "ls", s.queue, "pending", "--since", "1h")
	require.Len(t, l.Jobs, 3)
	okJSON(t, srv.Addr, &l, "ls", s.queue, "pending", "--until", "2h", "--since", "3h")
	require.Empty(t, l.Jobs)

	text := lines(ok(t, srv.Addr, "ls", s.queue, "dead", "--limit", "1"))
	require.Equal(t, []string{
		"ID MINTED",
		s.dead[0].String() + " " + fmtTime(s.dead[0].Time()),
		"more: emq ls " + s.queue + " dead --limit 1 --after " + s.dead[0].String(),
	}, text)
}

func listedIDs(l listing) []string {
	out := make([]string, len(l.Jobs))
	for i, j := range l.Jobs {
		out[i] = j.ID
	}
	return out
}

func TestShow(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Shared(t)
	s := seed(t, srv)

	var j shownJob
	okJSON(t, srv.Addr, &j, "show", s.queue, s.pending[0].String())
	require.Equal(t, "email.send", j.Kind)
	require.Equal(t, "pending", j.State)
	require.Equal(t, "pending", j.Set)
	require.Zero(t, j.Attempts)
	var args emailArgs
	require.NoError(t, json.Unmarshal(j.Args, &args))
	require.Equal(t, emailArgs{To: "ada", Subject: "hello ada"}, args)

	okJSON(t, srv.Addr, &j, "show", s.queue, s.scheduled.String())
	require.Equal(t, "scheduled", j.Set)
	require.NotNil(t, j.At)

	okJSON(t, srv.Addr, &j, "show", s.queue, s.dead[0].String())
	require.Equal(t, "dead", j.State)
	require.Equal(t, int64(1), j.Attempts)
	require.Equal(t, "bad", j.Kind)
	require.JSONEq(t, "0", string(j.Args))

	body, err := json.Marshal(emailArgs{To: "grace", Subject: "hello grace"})
	require.NoError(t, err)
	text := ok(t, srv.Addr, "show", s.queue, s.pending[1].String())
	want := strings.Join([]string{
		"queue: " + s.queue,
		"id: " + s.pending[1].String(),
		"minted: " + fmtTime(s.pending[1].Time()),
		"state: pending",
		"attempts: 0",
		"set: pending",
		"kind: email.send",
		fmt.Sprintf("payload: %d bytes", len("email.send")+1+len(body)),
		"args:",
		"{",
		`"to": "grace",`,
		`"subject": "hello grace"`,
		"}",
	}, "\n")
	require.Equal(t, want, strings.Join(lines(text), "\n"))
}
