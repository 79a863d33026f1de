package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
)

// TestPeriodic: emq periodic lists a queue's schedules (a cron spec in its zone, a fixed
// period with catch-up), pauses and resumes one, and removes one with --yes; a schedule that
// does not exist is exit 3, a malformed name exit 2, a removal without --yes off a terminal
// exit 5 with nothing removed.
func TestPeriodic(t *testing.T) {
	t.Parallel()
	srv, b, queue := sharedQueue(t)
	ctx := context.Background()
	require.NoError(t, b.DeclarePeriodic(ctx, queue, bus.Periodic{Name: "eod-report", Cron: "0 22 * * 1-5", Zone: "America/New_York", Kind: "eod-report"}))
	require.NoError(t, b.DeclarePeriodic(ctx, queue, bus.Periodic{Name: "reconcile", Every: 5 * time.Minute, Kind: "reconcile", Missed: bus.MissedCatchUp, CatchUp: 3}))

	var l periodicListing
	okJSON(t, srv.Addr, &l, "periodic", queue)
	require.Len(t, l.Schedules, 2)
	eod, rec := l.Schedules[0], l.Schedules[1]
	require.Equal(t, "eod-report", eod.Name)
	require.Equal(t, "0 22 * * 1-5", eod.Cron)
	require.Equal(t, "America/New_York", eod.Zone)
	require.NotNil(t, eod.Next)
	require.Equal(t, 22, eod.Next.In(mustZone(t, "America/New_York")).Hour(), "the next tick is at 22:00 New York time")
	require.Equal(t, "reconcile", rec.Name)
	require.Equal(t, float64(300_000), rec.EveryMS)
	require.Equal(t, 3, rec.CatchUp)
	require.False(t, rec.Paused)
	text := lines(ok(t, srv.Addr, "periodic", queue))
	require.Equal(t, "NAME SCHEDULE KIND MISSED PAUSED LAST NEXT", text[0])
	require.Contains(t, text[1], "eod-report cron 0 22 * * 1-5 (America/New_York) eod-report latest no")
	require.Contains(t, text[2], "reconcile every 5m0s reconcile catch_up 3 no")

	require.Equal(t, []string{queue + ": periodic schedule reconcile paused"}, lines(ok(t, srv.Addr, "periodic", "pause", queue, "reconcile")))
	okJSON(t, srv.Addr, &l, "periodic", queue)
	require.True(t, l.Schedules[1].Paused)
	ok(t, srv.Addr, "periodic", "resume", queue, "reconcile")
	okJSON(t, srv.Addr, &l, "periodic", queue)
	require.False(t, l.Schedules[1].Paused)

	r := emq(t, srv.Addr, "periodic", "pause", queue, "nope")
	require.Equal(t, exitNotFound, r.code, r.err)
	r = emq(t, srv.Addr, "periodic", "pause", queue, "bad name")
	require.Equal(t, exitUsage, r.code, r.err)
	r = emq(t, srv.Addr, "periodic", "remove", queue, "eod-report")
	require.Equal(t, exitRefused, r.code, r.err)
	require.Contains(t, r.err, "--yes")
	okJSON(t, srv.Addr, &l, "periodic", queue)
	require.Len(t, l.Schedules, 2, "an unconfirmed removal removes nothing")

	require.Equal(t, []string{queue + ": periodic schedule eod-report removed"}, lines(ok(t, srv.Addr, "periodic", "remove", queue, "eod-report", "--yes")))
	okJSON(t, srv.Addr, &l, "periodic", queue)
	require.Len(t, l.Schedules, 1)
	require.Equal(t, "reconcile", l.Schedules[0].Name)
	r = emq(t, srv.Addr, "periodic", "remove", queue, "eod-report", "--yes")
	require.Equal(t, exitNotFound, r.code, r.err)

	// A queue with no schedule: an empty list, not an error.
	_, err := b.Enqueue(ctx, queue+".plain", []byte("x"), nil)
	require.NoError(t, err)
	require.Equal(t, []string{queue + ".plain: no periodic schedules"}, lines(ok(t, srv.Addr, "periodic", queue+".plain")))
}

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	require.NoError(t, err)
	return loc
}
