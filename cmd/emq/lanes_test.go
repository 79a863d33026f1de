package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
)

// laneSeeded is a queue with lane state, as seedLanes made it.
type laneSeeded struct {
	queue string
	b     *bus.Bus
	// betaHeld is when beta may give work again (its RateLimited).
	betaHeld time.Time
}

// seedLanes makes a queue with lanes and no worker: the queue's rate is 1000/1s burst 50 and
// its lanes' default cap 10; acme has its own cap 5, rate 200/1s burst 20 and weight 2.
// Two jobs of beta were enqueued, one claimed and handed back RateLimited for an hour (beta is
// held); then three jobs of acme, one job without a lane and one of acme at priority 2, which
// a claim took (acme has 1 active); then one job without a lane at priority 1 (urgent). The
// lane gamma, with no job, is paused.
func seedLanes(t *testing.T, srv *valkeytest.Server) laneSeeded {
	t.Helper()
	ctx := context.Background()
	b, err := bus.New(srv.Client(t), bus.Config{})
	require.NoError(t, err)
	s := laneSeeded{queue: valkeytest.TestName(t), b: b}
	enqueue := func(lane string, prio int) {
		t.Helper()
		_, err := b.Enqueue(ctx, s.queue, []byte("job of "+lane), &bus.EnqueueOpts{Lane: lane, Priority: prio})
		require.NoError(t, err)
	}
	claimOne := func(lane string) bus.Job {
		t.Helper()
		jobs, err := b.Claim(ctx, s.queue, &bus.ClaimOpts{Lease: time.Hour})
		require.NoError(t, err)
		require.Len(t, jobs, 1)
		require.Equal(t, lane, jobs[0].Lane)
		return jobs[0]
	}
	require.NoError(t, b.SetQueueLimits(ctx, s.queue, bus.QueueLimits{Rate: bus.Rate{Limit: 1000, Per: time.Second, Burst: 50}, Lanes: bus.LaneLimits{Cap: 10}}))
	require.NoError(t, b.SetLaneLimits(ctx, s.queue, "acme", bus.LaneLimits{Cap: 5, Rate: bus.Rate{Limit: 200, Per: time.Second, Burst: 20}, Weight: 2}))
	enqueue("beta", 0)
	enqueue("beta", 0)
	s.betaHeld, err = b.RateLimited(ctx, claimOne("beta"), time.Hour, nil)
	require.NoError(t, err)
	for range 3 {
		enqueue("acme", 0)
	}
	enqueue("", 0)
	enqueue("acme", 2)
	claimOne("acme")
	enqueue("", 1)
	require.NoError(t, b.PauseLane(ctx, s.queue, "gamma"))
	return s
}

func TestLanes(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Shared(t)
	s := seedLanes(t, srv)
	ctx := context.Background()
	head := "queue " + s.queue + ": rate 1000/1s burst 50; lane defaults: cap 10; held until -"
	cols := "LANE CAP RATE WEIGHT PAUSED WAITING ACTIVE READY HELD UNTIL"
	acme := "acme 5 200/1s burst 20 2 no 3 1 yes -"

	// The default set, ready: the queue's own stream (it has a rate, so it competes with the
	// lanes) and acme; beta is held, gamma has no work.
	require.Equal(t, []string{head, cols, "(queue) - - - - - - yes -", acme}, lines(ok(t, srv.Addr, "lanes", s.queue)))
	beta, err := s.b.Lane(ctx, s.queue, "beta")
	require.NoError(t, err)
	require.WithinDuration(t, s.betaHeld, beta.HeldUntil, time.Millisecond)
	require.Equal(t, []string{head, cols, "beta 10 - 1 no 2 0 no " + fmtTime(beta.HeldUntil)},
		lines(ok(t, srv.Addr, "lanes", s.queue, "--set", "held")))
	require.Equal(t, []string{head, cols, acme}, lines(ok(t, srv.Addr, "lanes", s.queue, "--set", "active")))
	limits := lines(ok(t, srv.Addr, "lanes", s.queue, "--set", "limits"))
	require.Equal(t, []string{head, cols}, limits[:2])
	require.ElementsMatch(t, []string{acme, "gamma 10 - 1 yes 0 0 no -"}, limits[2:]) // a hash: any order

	// --json: the same, with the limits in force and the lane's own apart.
	var l lanesListing
	okJSON(t, srv.Addr, &l, "lanes", s.queue)
	rate := &rateRow{Limit: 200, PerMS: 1000, Burst: 20}
	require.Equal(t, "ready", l.Set)
	require.True(t, l.QueueStream)
	require.Equal(t, &rateRow{Limit: 1000, PerMS: 1000, Burst: 50}, l.Flow.Rate)
	require.Equal(t, limitsRow{Cap: 10}, l.Flow.LaneDefaults)
	require.Nil(t, l.Flow.HeldUntil)
	require.WithinDuration(t, time.Now(), l.Flow.Now, time.Minute)
	require.Equal(t, []laneRow{{Name: "acme", Limits: limitsRow{Cap: 5, Rate: rate, Weight: 2}, Own: limitsRow{Cap: 5, Rate: rate, Weight: 2},
		Waiting: 3, Active: 1, Ready: true}}, l.Lanes)
	require.Empty(t, l.Next)
	okJSON(t, srv.Addr, &l, "lanes", s.queue, "--set", "held")
	require.Len(t, l.Lanes, 1)
	held := beta.HeldUntil.UTC()
	require.Equal(t, laneRow{Name: "beta", Limits: limitsRow{Cap: 10, Weight: 1}, Waiting: 2, HeldUntil: &held}, l.Lanes[0])

	// One lane, and one that does not exist (it reads as empty, with the defaults).
	require.Equal(t, []string{head, "lane acme", "limits cap 5, rate 200/1s burst 20, weight 2", "own limits cap 5, rate 200/1s burst 20, weight 2",
		"paused no", "waiting 3", "active 1", "ready yes", "held until -"}, lines(ok(t, srv.Addr, "lane", s.queue, "acme")))
	var one oneLane
	okJSON(t, srv.Addr, &one, "lane", s.queue, "nobody")
	require.Equal(t, laneRow{Name: "nobody", Limits: limitsRow{Cap: 10, Weight: 1}}, one.Lane)
	require.Equal(t, s.queue, one.Queue)

	// Pause acme: it leaves the round robin, its claimed job runs on; resume brings it back.
	require.Equal(t, s.queue+": lane acme paused\n", ok(t, srv.Addr, "lane", "pause", s.queue, "acme"))
	info, err := s.b.Lane(ctx, s.queue, "acme")
	require.NoError(t, err)
	require.True(t, info.Paused)
	require.Equal(t, int64(1), info.Active)
	okJSON(t, srv.Addr, &one, "lane", s.queue, "acme")
	require.True(t, one.Lane.Paused)
	require.Equal(t, []string{head, cols, "(queue) - - - - - - yes -"}, lines(ok(t, srv.Addr, "lanes", s.queue)))
	var ch changed
	okJSON(t, srv.Addr, &ch, "lane", "resume", s.queue, "acme")
	require.Equal(t, changed{Queue: s.queue, Lane: "acme", Action: "resumed"}, ch)
	info, err = s.b.Lane(ctx, s.queue, "acme")
	require.NoError(t, err)
	require.False(t, info.Paused)
	// Pausing a paused lane and resuming a running one are not errors.
	ok(t, srv.Addr, "lane", "resume", s.queue, "acme")
	ok(t, srv.Addr, "lane", "pause", s.queue, "gamma")
}

func TestLanesPaging(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Shared(t)
	s := seedLanes(t, srv)
	ctx := context.Background()
	for _, lane := range []string{"l1", "l2", "l3"} {
		require.NoError(t, s.b.SetLaneLimits(ctx, s.queue, lane, bus.LaneLimits{Weight: 3}))
	}

	// ready pages by rank: one lane a page, the next page from the printed cursor.
	out := lines(ok(t, srv.Addr, "lanes", s.queue, "--limit", "1"))
	require.Len(t, out, 4)
	require.Equal(t, "(queue) - - - - - - yes -", out[2])
	require.Equal(t, "more: emq lanes "+s.queue+" --set ready --limit 1 --cursor 1", out[3])
	var l lanesListing
	okJSON(t, srv.Addr, &l, "lanes", s.queue, "--limit", "1", "--cursor", "1")
	require.Equal(t, []string{"acme"}, laneNames(l.Lanes))
	require.False(t, l.QueueStream)
	require.Empty(t, l.Next, "acme is the last lane of ready")

	// limits pages by the hash's scan cursor: every lane comes once over the pages.
	var seen []string
	cursor := ""
	for range 20 {
		args := []string{"lanes", s.queue, "--set", "limits", "--limit", "1"}
		if cursor != "" {
			args = append(args, "--cursor", cursor)
		}
		okJSON(t, srv.Addr, &l, args...)
		seen = append(seen, laneNames(l.Lanes)...)
		if cursor = l.Next; cursor == "" {
			break
		}
	}
	require.ElementsMatch(t, []string{"acme", "gamma", "l1", "l2", "l3"}, seen)
	okJSON(t, srv.Addr, &l, "lanes", s.queue, "--set", "limits", "--limit", "1000")
	require.ElementsMatch(t, []string{"acme", "gamma", "l1", "l2", "l3"}, laneNames(l.Lanes))
	for _, r := range l.Lanes {
		if r.Name[0] == 'l' {
			require.Equal(t, limitsRow{Weight: 3}, r.Own)
			require.Equal(t, limitsRow{Cap: 10, Weight: 3}, r.Limits)
		}
	}
}

func laneNames(rows []laneRow) []string {
	out := []string{}
	for _, r := range rows {
		out = append(out, r.Name)
	}
	return out
}

func TestLanesStats(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Shared(t)
	s := seedLanes(t, srv)
	var rows []queueStats
	okJSON(t, srv.Addr, &rows, "stats", s.queue)
	require.Len(t, rows, 1)
	r := rows[0]
	require.Equal(t, [7]int64{7, 1, 5, 1, 2, 1, 1}, [7]int64{r.Pending, r.Active, r.InLanes, r.Urgent, r.LanesReady, r.LanesHeld, r.LanesActive})
	out := lines(ok(t, srv.Addr, "stats", s.queue))
	require.Len(t, out, 2)
	require.True(t, strings.HasSuffix(out[0], "CANCELLED IN LANES URGENT LANES READY LANES HELD LANES ACTIVE"), out[0])
	require.True(t, strings.HasSuffix(out[1], " 5 1 2 1 1"), out[1])

	// A queue without lanes: no lane columns.
	plain := valkeytest.TestName(t) + "-plain"
	ok(t, srv.Addr, "enqueue", plain, "x")
	out = lines(ok(t, srv.Addr, "stats", plain))
	require.True(t, strings.HasSuffix(out[0], "CANCELLED"), out[0])
	okJSON(t, srv.Addr, &rows, "stats", plain)
	require.Zero(t, rows[0].InLanes)
}

func TestLanesErrors(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Shared(t)
	s := seedLanes(t, srv)
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"lane", s.queue, "bad name"}, exitUsage, `lane: keys: invalid name "bad name"`},
		{[]string{"lane", "pause", s.queue, "bad/name"}, exitUsage, "lane: keys: invalid name"},
		{[]string{"lane", "resume", s.queue, ""}, exitUsage, "lane: keys: invalid name"},
		{[]string{"lane", s.queue}, exitUsage, "accepts 2 arg(s)"},
		{[]string{"lanes", s.queue, "--set", "pending"}, exitUsage, `--set "pending": lanes lists ready, held, active, limits`},
		{[]string{"lanes", s.queue, "--limit", "0"}, exitUsage, "--limit: 0 is not 1 to 1000"},
		{[]string{"lanes", s.queue, "--cursor", "x"}, exitUsage, `cursor "x"`},
		{[]string{"lanes", "nosuch"}, exitNotFound, "queue nosuch is not in the registry"},
		{[]string{"lane", "nosuch", "acme"}, exitNotFound, "queue nosuch is not in the registry"},
		{[]string{"lane", "pause", "nosuch", "acme"}, exitNotFound, "queue nosuch is not in the registry"},
		{[]string{"lanes", "bad queue"}, exitUsage, "queue: keys: invalid name"},
	} {
		r := emq(t, srv.Addr, c.args...)
		require.Equal(t, c.code, r.code, "%v: %s", c.args, r.err)
		require.Contains(t, r.err, c.msg, c.args)
		require.Empty(t, r.out, c.args)
		var je jsonError
		r = emq(t, srv.Addr, append(c.args, "--json")...)
		require.NoError(t, json.Unmarshal([]byte(r.err), &je), r.err)
		require.Equal(t, c.code, je.Exit, c.args)
	}
	// The refused pause wrote nothing: the unknown queue is not registered, its lane not paused.
	qs, err := s.b.Queues(context.Background())
	require.NoError(t, err)
	for _, q := range qs {
		require.NotEqual(t, "nosuch", q.Name)
	}
	info, err := s.b.Lane(context.Background(), "nosuch", "acme")
	require.NoError(t, err)
	require.False(t, info.Paused)
}
