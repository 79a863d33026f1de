package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
)

// TestLsPendingNotesLanes: ls pending lists the jobs without a lane, and says how many more
// wait in lanes and at a priority (in the text, one line after the list; in --json, as
// in_lanes and urgent), so that a queue whose work waits in lanes does not read as empty.
// The other sets carry no such counts, and a queue without lane jobs prints no line.
func TestLsPendingNotesLanes(t *testing.T) {
	t.Parallel()
	srv, b, queue := sharedQueue(t)
	ctx := context.Background()
	enqueue := func(lane string, prio int) string {
		t.Helper()
		e, err := b.Enqueue(ctx, queue, []byte("job"), &bus.EnqueueOpts{Lane: lane, Priority: prio})
		require.NoError(t, err)
		return e.ID.String()
	}

	// Only lane and urgent jobs: the list is empty, the line says where the work is.
	for range 3 {
		enqueue("acme", 0)
	}
	enqueue("beta", 0)
	enqueue("", 1)
	enqueue("acme", 3)
	c, err := b.Counts(ctx, queue)
	require.NoError(t, err)
	require.Equal(t, [3]int64{6, 4, 2}, [3]int64{c.Pending, c.InLanes, c.Urgent})
	note := "this list holds the jobs without a lane; 4 more wait in lanes and 2 at a priority (see emq lanes " + queue + ")"

	l, n := pendingJSON(t, srv.Addr, queue)
	require.Empty(t, l.Jobs)
	require.NotNil(t, n.InLanes, "in_lanes in the JSON of pending")
	require.NotNil(t, n.Urgent, "urgent in the JSON of pending")
	require.Equal(t, [2]int64{4, 2}, [2]int64{*n.InLanes, *n.Urgent})
	require.Equal(t, []string{"ID MINTED", note}, lines(ok(t, srv.Addr, "ls", queue, "pending")))

	// With jobs without a lane: the line follows the list, before the next page's command.
	first := enqueue("", 0)
	enqueue("", 0)
	text := lines(ok(t, srv.Addr, "ls", queue, "pending", "--limit", "1"))
	require.Len(t, text, 4)
	require.True(t, strings.HasPrefix(text[1], first+" "), text[1])
	require.Equal(t, note, text[2])
	require.Equal(t, "more: emq ls "+queue+" pending --limit 1 --after "+first, text[3])

	// Another set: neither the counts nor the line.
	out := ok(t, srv.Addr, "ls", queue, "dead", "--json")
	require.NotContains(t, out, "in_lanes")
	require.NotContains(t, out, "urgent")
	require.Equal(t, []string{"ID MINTED"}, lines(ok(t, srv.Addr, "ls", queue, "dead")))

	// A queue without lane or urgent jobs: zero counts in the JSON, no line.
	plain := queue + "-plain"
	_, err = b.Enqueue(ctx, plain, []byte("job"), nil)
	require.NoError(t, err)
	l, n = pendingJSON(t, srv.Addr, plain)
	require.Len(t, l.Jobs, 1)
	require.NotNil(t, n.InLanes)
	require.NotNil(t, n.Urgent)
	require.Zero(t, *n.InLanes)
	require.Zero(t, *n.Urgent)
	text = lines(ok(t, srv.Addr, "ls", plain, "pending"))
	require.Len(t, text, 2)
	require.NotContains(t, strings.Join(text, "\n"), "lane")
}

// laneCounts are the lane counts of the JSON of ls pending, by their names in it.
type laneCounts struct {
	InLanes *int64 `json:"in_lanes"`
	Urgent  *int64 `json:"urgent"`
}

// pendingJSON runs ls queue pending --json and decodes it as a listing and as its lane counts.
func pendingJSON(t *testing.T, addr, queue string) (listing, laneCounts) {
	t.Helper()
	out := ok(t, addr, "ls", queue, "pending", "--json")
	var l listing
	var n laneCounts
	require.NoError(t, json.Unmarshal([]byte(out), &l), out)
	require.NoError(t, json.Unmarshal([]byte(out), &n), out)
	return l, n
}
