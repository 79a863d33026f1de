package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/keys"
)

// TestLsActiveScheduled lists active by lease deadline and scheduled by run-at, both in the
// reverse of mint order by construction, pages them by the (id, time) cursor, and refuses the
// flags that do not apply.
func TestLsActiveScheduled(t *testing.T) {
	t.Parallel()
	srv, b, queue := sharedQueue(t)
	ctx := context.Background()

	// Three jobs claimed one by one, the oldest with the longest lease: active's order (next
	// lease to run out first) is the newest id first.
	var active []bus.Job
	for i, lease := range []time.Duration{3 * time.Hour, 2 * time.Hour, time.Hour} {
		_, err := b.Enqueue(ctx, queue, []byte{byte('a' + i)}, nil)
		require.NoError(t, err)
		js, err := b.Claim(ctx, queue, &bus.ClaimOpts{Lease: lease})
		require.NoError(t, err)
		require.Len(t, js, 1)
		active = append(active, js[0])
	}
	var scheduled []keys.JobID
	for i, delay := range []time.Duration{3 * time.Hour, 2 * time.Hour, time.Hour} {
		e, err := b.Enqueue(ctx, queue, []byte{byte('x' + i)}, &bus.EnqueueOpts{Delay: delay})
		require.NoError(t, err)
		scheduled = append(scheduled, e.ID)
	}

	var l listing
	okJSON(t, srv.Addr, &l, "ls", queue, "active")
	require.Equal(t, []string{active[2].ID.String(), active[1].ID.String(), active[0].ID.String()}, listedIDs(l))
	require.Empty(t, l.Next)
	require.Nil(t, l.NextAt)
	for i, j := range l.Jobs {
		require.NotNil(t, j.At)
		require.NotNil(t, j.Token)
		require.Equal(t, active[2-i].Token, *j.Token)
		// The deadline is the claim's server time plus its lease, an hour apart.
		want := time.Until(time.Now().Add(time.Duration(i+1) * time.Hour))
		require.InDelta(t, want.Seconds(), time.Until(*j.At).Seconds(), 60, "lease of %s", j.ID)
	}

	// Paging: two, then the rest after the (id, time) cursor.
	okJSON(t, srv.Addr, &l, "ls", queue, "active", "--limit", "2")
	require.Equal(t, []string{active[2].ID.String(), active[1].ID.String()}, listedIDs(l))
	require.Equal(t, active[1].ID.String(), l.Next)
	require.NotNil(t, l.NextAt)
	require.Equal(t, l.Jobs[1].At.UnixMilli(), l.NextAt.UnixMilli())
	okJSON(t, srv.Addr, &l, "ls", queue, "active", "--limit", "2", "--after", l.Next, "--after-at", fmtTime(*l.NextAt))
	require.Equal(t, []string{active[0].ID.String()}, listedIDs(l))
	require.Empty(t, l.Next)

	okJSON(t, srv.Addr, &l, "ls", queue, "scheduled", "--newest")
	require.Equal(t, idStrings(scheduled), listedIDs(l), "newest run-at first: the oldest id")
	require.Zero(t, *l.Jobs[0].Token, "a scheduled job never claimed")

	text := lines(ok(t, srv.Addr, "ls", queue, "scheduled", "--limit", "1"))
	require.Len(t, text, 3)
	require.Equal(t, "ID MINTED RUN AT ATTEMPTS", text[0])
	var first listing
	okJSON(t, srv.Addr, &first, "ls", queue, "scheduled", "--limit", "1")
	s := scheduled[2]
	require.Equal(t, s.String()+" "+fmtTime(s.Time())+" "+fmtTime(*first.Jobs[0].At)+" 0", text[1])
	require.Equal(t, "more: emq ls "+queue+" scheduled --limit 1 --after "+s.String()+" --after-at "+fmtTime(*first.Jobs[0].At), text[2])
	// The printed command runs and gives the next page, of the same size.
	more := strings.Fields(strings.TrimPrefix(text[2], "more: emq "))
	okJSON(t, srv.Addr, &l, more...)
	require.Equal(t, []string{scheduled[1].String()}, listedIDs(l))

	text = lines(ok(t, srv.Addr, "ls", queue, "active", "--limit", "1"))
	require.Equal(t, "ID MINTED LEASE UNTIL TOKEN", text[0])
	require.True(t, strings.HasSuffix(text[1], " 1"), text[1])

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"since on active", []string{"ls", queue, "active", "--since", "1h"}, "--since/--until bound the mint time of pending and dead; active"},
		{"until on scheduled", []string{"ls", queue, "scheduled", "--until", "1h"}, "--since/--until bound the mint time of pending and dead; scheduled"},
		{"after-at on pending", []string{"ls", queue, "pending", "--after-at", fmtTime(time.Now())}, "--after-at is the cursor of active and scheduled"},
		{"after without after-at", []string{"ls", queue, "active", "--after", active[0].ID.String()}, "--after and --after-at together"},
		{"bad after-at", []string{"ls", queue, "active", "--after", active[0].ID.String(), "--after-at", "soon"}, `--after-at "soon": not an RFC 3339 time`},
		{"page too large", []string{"ls", queue, "active", "--limit", "1001"}, "at most 1000"},
		{"unknown set", []string{"ls", queue, "running"}, "ls lists pending, active, scheduled, dead"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := emq(t, srv.Addr, tc.args...)
			require.Equal(t, exitUsage, r.code, r.err)
			require.Contains(t, r.err, tc.want)
		})
	}
}
