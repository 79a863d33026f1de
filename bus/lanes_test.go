package bus_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// enqueueLane enqueues n jobs with payloads prefix0..prefixN-1 into lane at priority.
func enqueueLane(t *testing.T, b *bus.Bus, queue, lane string, prio, n int, prefix string) []keys.JobID {
	t.Helper()
	out, err := b.EnqueueBatch(context.Background(), queue, payloads(n, prefix), &bus.EnqueueOpts{Lane: lane, Priority: prio})
	require.NoError(t, err)
	ids := make([]keys.JobID, len(out))
	for i, e := range out {
		ids[i] = e.ID
	}
	return ids
}

// lanesOf is the lanes of the claimed jobs, in claim order ("-" for none).
func lanesOf(jobs []bus.Job) string {
	var out []string
	for _, j := range jobs {
		l := j.Lane
		if l == "" {
			l = "-"
		}
		out = append(out, l)
	}
	return strings.Join(out, " ")
}

func claimN(t *testing.T, b *bus.Bus, queue string, n int) []bus.Job {
	t.Helper()
	jobs, err := b.Claim(context.Background(), queue, &bus.ClaimOpts{Count: n, Lease: time.Minute})
	require.NoError(t, err)
	return jobs
}

// TestLaneRoundRobin: lanes take turns of at most 32 jobs, FIFO inside each lane: claims of one
// job alternate lanes job by job, a claim of more than a turn spans lanes, a lane's score grows
// by the jobs it gave; a lane that joins later takes its turn at the virtual clock, and the jobs
// without a lane are one more lane.
func TestLaneRoundRobin(t *testing.T) {
	t.Parallel()
	valkeytest.OnTargets(t, func(t *testing.T, tg valkeytest.Target) {
		ctx, _, b, name, _ := setup(t, tg, bus.Config{})
		a := enqueueLane(t, b, name, "a", 0, 71, "a")
		bb := enqueueLane(t, b, name, "b", 0, 41, "b")
		var one []bus.Job
		for range 2 {
			one = append(one, claimN(t, b, name, 1)...)
		}
		require.Equal(t, "a b", lanesOf(one), "claims of one job alternate")
		require.Equal(t, []keys.JobID{a[0], bb[0]}, []keys.JobID{one[0].ID, one[1].ID})
		// a and b at 1: a's turn (the tie goes by name) of 32, b's of 32, a's of 32, then the
		// claim needs 4 more: b gives them.
		jobs := claimN(t, b, name, 100)
		require.Equal(t, "a×32 b×32 a×32 b×4", turnsOf(jobs))
		var gotA []keys.JobID
		for _, j := range jobs {
			if j.Lane == "a" {
				gotA = append(gotA, j.ID)
			}
		}
		require.Equal(t, a[1:65], gotA, "FIFO inside each lane")
		enqueueLane(t, b, name, "c", 0, 3, "c")
		_, err := b.Enqueue(ctx, name, []byte("plain"), nil)
		require.NoError(t, err)
		// The virtual clock is 33 (where a and b began their last turns); c and the plain job join
		// there, before b (37) and a (65); ties go by name: "" (the jobs without a lane) first.
		// The empty lanes leave the round robin; a gives the rest.
		jobs = claimN(t, b, name, 12)
		require.Equal(t, "-×1 c×3 b×4 a×4", turnsOf(jobs))
		for _, j := range append(one, jobs...) {
			require.NoError(t, b.Complete(ctx, j, nil))
		}
		c, err := b.Counts(ctx, name)
		require.NoError(t, err)
		require.Equal(t, int64(2), c.Pending, "a's last two")
		require.Equal(t, int64(2), c.InLanes)
		require.Equal(t, int64(100), c.Active)
		require.Equal(t, int64(2), c.LanesActive, "a and b have claimed jobs")
	})
}

// turnsOf is the lanes of the claimed jobs as runs in claim order, "a×32 b×4" ("-" for none).
func turnsOf(jobs []bus.Job) string {
	var out []string
	for i := 0; i < len(jobs); {
		k := i
		for k < len(jobs) && jobs[k].Lane == jobs[i].Lane {
			k++
		}
		l := jobs[i].Lane
		if l == "" {
			l = "-"
		}
		out = append(out, fmt.Sprintf("%s×%d", l, k-i))
		i = k
	}
	return strings.Join(out, " ")
}

// TestLaneCap: a lane at its cap gives nothing until a slot frees; completing one of its jobs
// gives the slot back and pushes a wake marker; after the drain every count is zero.
func TestLaneCap(t *testing.T) {
	t.Parallel()
	valkeytest.OnTargets(t, func(t *testing.T, tg valkeytest.Target) {
		ctx, c, b, name, q := setup(t, tg, bus.Config{})
		require.NoError(t, b.SetLaneLimits(ctx, name, "a", bus.LaneLimits{Cap: 2}))
		enqueueLane(t, b, name, "a", 0, 5, "a")
		enqueueLane(t, b, name, "b", 0, 5, "b")
		jobs := claimN(t, b, name, 10)
		require.Equal(t, "a a b b b b b", lanesOf(jobs), "a's turn stops at its cap of 2")
		info, err := b.Lane(ctx, name, "a")
		require.NoError(t, err)
		require.Equal(t, int64(2), info.Active)
		require.Equal(t, int64(3), info.Waiting)
		require.False(t, info.Ready, "a lane at its cap leaves the round robin")
		require.Empty(t, claimN(t, b, name, 10))
		require.NoError(t, c.Do(ctx, c.B().Del().Key(q.Wake()).Build()).Error())
		require.NoError(t, b.Complete(ctx, jobs[0], nil))
		n, err := c.Do(ctx, c.B().Llen().Key(q.Wake()).Build()).AsInt64()
		require.NoError(t, err)
		require.Equal(t, int64(1), n, "the freed slot of a lane with work pushes a wake marker")
		more := claimN(t, b, name, 10)
		require.Equal(t, "a", lanesOf(more))
		for _, j := range append(jobs[1:], more...) {
			require.NoError(t, b.Complete(ctx, j, nil))
		}
		for {
			js := claimN(t, b, name, 10)
			if len(js) == 0 {
				break
			}
			for _, j := range js {
				require.NoError(t, b.Complete(ctx, j, nil))
			}
		}
		counts, err := b.Counts(ctx, name)
		require.NoError(t, err)
		require.Equal(t, bus.Counts{}, counts, "after the drain every count is zero")
		left := scanAll(t, c, "{"+name+"}")
		require.ElementsMatch(t, []string{q.Lanes(), q.Wake()}, left, "only the lane's limits and wake markers remain")
	})
}

// TestLanePriority: a job of priority 3 enqueued behind 10,000 ordinary ones is claimed by the
// next claim; within a priority, mint order.
func TestLanePriority(t *testing.T) {
	t.Parallel()
	ctx, _, b, name, _ := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	for i := 0; i < 10; i++ {
		_, err := b.EnqueueBatch(ctx, name, payloads(1000, "p"), nil)
		require.NoError(t, err)
	}
	urgent := enqueueLane(t, b, name, "", 3, 1, "urgent")
	mid := enqueueLane(t, b, name, "x", 1, 2, "mid")
	jobs := claimN(t, b, name, 1)
	require.Len(t, jobs, 1)
	require.Equal(t, urgent[0], jobs[0].ID, "the urgent job is claimed by the next claim")
	jobs = claimN(t, b, name, 3)
	require.Equal(t, []keys.JobID{mid[0], mid[1]}, []keys.JobID{jobs[0].ID, jobs[1].ID})
	require.Equal(t, "x x -", lanesOf(jobs))
	info, err := b.Lookup(ctx, name, mid[0])
	require.NoError(t, err)
	require.Equal(t, "x", info.Lane)
	require.Equal(t, 1, info.Priority)
	require.Equal(t, keys.Active, info.Set)
}

// TestLaneRateLimited: RateLimited(d) hands the job back with its attempts unchanged and its
// claim refunded, and closes its lane for d: no claim from it meanwhile.
func TestLaneRateLimited(t *testing.T) {
	t.Parallel()
	valkeytest.OnTargets(t, func(t *testing.T, tg valkeytest.Target) {
		ctx, c, b, name, _ := setup(t, tg, bus.Config{})
		enqueueLane(t, b, name, "p", 0, 3, "p")
		enqueueLane(t, b, name, "q", 0, 3, "q")
		jobs := claimN(t, b, name, 1)
		require.Equal(t, "p", lanesOf(jobs))
		before := serverMillis(t, c)
		until, err := b.RateLimited(ctx, jobs[0], 300*time.Millisecond, nil)
		require.NoError(t, err)
		require.GreaterOrEqual(t, until.UnixMilli(), before+300)
		info, err := b.Lookup(ctx, name, jobs[0].ID)
		require.NoError(t, err)
		require.Equal(t, int64(1), info.Attempts, "attempts unchanged")
		require.Equal(t, int64(1), info.Refunds)
		require.Equal(t, keys.LanePending, info.Set)
		got := claimN(t, b, name, 10)
		require.Equal(t, "q q q", lanesOf(got), "p is closed")
		lane, err := b.Lane(ctx, name, "p")
		require.NoError(t, err)
		require.Equal(t, until.UnixMilli(), lane.HeldUntil.UnixMilli())
		valkeytest.Eventually(t, 5*time.Second, "p to open again", func() bool { return serverMillis(t, c) > until.UnixMilli() })
		got = claimN(t, b, name, 10)
		require.Equal(t, "p p p", lanesOf(got))
		require.Equal(t, jobs[0].ID, got[0].ID, "the handed-back job is first again")
		require.Equal(t, int64(2), got[0].Token, "the next claim mints a newer token")
	})
}

// TestLaneRate: 50 claims a second with a burst of 5: 5 at once, then none until the window of
// 100 ms has passed; the claim's wait says when.
func TestLaneRate(t *testing.T) {
	t.Parallel()
	valkeytest.OnTargets(t, func(t *testing.T, tg valkeytest.Target) {
		ctx, c, b, name, q := setup(t, tg, bus.Config{})
		require.NoError(t, b.SetLaneLimits(ctx, name, "r", bus.LaneLimits{Rate: bus.Rate{Limit: 50, Burst: 5}}))
		enqueueLane(t, b, name, "r", 0, 20, "r")
		start := serverMillis(t, c) // no later than the burst's claims
		jobs := claimN(t, b, name, 20)
		require.Len(t, jobs, 5, "the burst")
		require.Empty(t, claimN(t, b, name, 20))
		n, err := c.Do(ctx, c.B().Zcard().Key(q.LaneWait()).Build()).AsInt64()
		require.NoError(t, err)
		require.Equal(t, int64(1), n, "the lane waits in lanewait")
		var at int64
		valkeytest.Eventually(t, 5*time.Second, "the next burst", func() bool {
			js := claimN(t, b, name, 20)
			at = serverMillis(t, c)
			return len(js) > 0
		})
		// The burst's claims share one server time, at or after start; the next claim may come
		// once that time is a whole window behind it.
		require.GreaterOrEqual(t, at-start, int64(100), "not before the window of 100 ms")
	})
}

// TestLanePause: a paused lane gives nothing while its jobs wait; resuming wakes a worker.
func TestLanePause(t *testing.T) {
	t.Parallel()
	valkeytest.OnTargets(t, func(t *testing.T, tg valkeytest.Target) {
		ctx, _, b, name, _ := setup(t, tg, bus.Config{})
		enqueueLane(t, b, name, "a", 0, 2, "a")
		enqueueLane(t, b, name, "b", 0, 2, "b")
		require.NoError(t, b.PauseLane(ctx, name, "a"))
		require.Equal(t, "b b", lanesOf(claimN(t, b, name, 10)))
		info, err := b.Lane(ctx, name, "a")
		require.NoError(t, err)
		require.True(t, info.Paused)
		require.Equal(t, int64(2), info.Waiting)
		require.NoError(t, b.ResumeLane(ctx, name, "a"))
		require.Equal(t, "a a", lanesOf(claimN(t, b, name, 10)))
	})
}

// TestLaneBadInput: names by the rule of names, limits in their bounds, naming the field;
// nothing written; a lane that does not exist reads as empty.
func TestLaneBadInput(t *testing.T) {
	t.Parallel()
	valkeytest.OnTargets(t, func(t *testing.T, tg valkeytest.Target) {
		ctx, c, b, name, _ := setup(t, tg, bus.Config{})
		for _, lane := range []string{"a b", "a:b", "{x}", strings.Repeat("l", 65), "é"} {
			_, err := b.Enqueue(ctx, name, []byte("x"), &bus.EnqueueOpts{Lane: lane})
			require.ErrorIs(t, err, bus.ErrInvalid, lane)
			require.ErrorIs(t, err, keys.ErrInvalid, lane)
			require.Contains(t, err.Error(), "[A-Za-z0-9_.-]", "the error names the rule")
			require.ErrorIs(t, b.SetLaneLimits(ctx, name, lane, bus.LaneLimits{Cap: 1}), bus.ErrInvalid)
			require.ErrorIs(t, b.PauseLane(ctx, name, lane), bus.ErrInvalid)
		}
		for _, tc := range []struct {
			l     bus.LaneLimits
			field string
		}{
			{bus.LaneLimits{Cap: -1}, "Cap"},
			{bus.LaneLimits{Cap: bus.MaxLaneCap + 1}, "Cap"},
			{bus.LaneLimits{Weight: -1}, "Weight"},
			{bus.LaneLimits{Weight: 1001}, "Weight"},
			{bus.LaneLimits{Rate: bus.Rate{Limit: -5}}, "Rate.Limit"},
			{bus.LaneLimits{Rate: bus.Rate{Limit: 2_000_000}}, "Rate.Limit"},
			{bus.LaneLimits{Rate: bus.Rate{Limit: 5, Burst: -1}}, "Rate.Burst"},
			{bus.LaneLimits{Rate: bus.Rate{Limit: 5, Burst: 1_000_000}}, "Rate.Burst"},
			{bus.LaneLimits{Rate: bus.Rate{Limit: 5, Per: 48 * time.Hour}}, "Rate.Per"},
			{bus.LaneLimits{Rate: bus.Rate{Limit: 5, Per: time.Microsecond}}, "Rate.Per"},
			{bus.LaneLimits{Rate: bus.Rate{Burst: 5}}, "Rate"},
		} {
			err := b.SetLaneLimits(ctx, name, "a", tc.l)
			require.ErrorIs(t, err, bus.ErrInvalid, tc.field)
			require.Contains(t, err.Error(), tc.field)
			require.Contains(t, err.Error(), "queue "+name+", lane a", "the error names the queue and the lane")
			err = b.SetQueueLimits(ctx, name, bus.QueueLimits{Lanes: tc.l})
			require.ErrorIs(t, err, bus.ErrInvalid, tc.field)
			require.Contains(t, err.Error(), "queue "+name)
		}
		_, err := b.Enqueue(ctx, name, []byte("x"), &bus.EnqueueOpts{Priority: 4})
		require.ErrorIs(t, err, bus.ErrInvalid)
		require.Contains(t, err.Error(), "Priority")
		_, err = b.Enqueue(ctx, name, []byte("x"), &bus.EnqueueOpts{Priority: -1})
		require.ErrorIs(t, err, bus.ErrInvalid)
		require.Empty(t, scanAll(t, c, "{"+name+"}"), "nothing written")
		info, err := b.Lane(ctx, name, "nobody")
		require.NoError(t, err)
		require.Equal(t, bus.LaneInfo{Name: "nobody", Limits: bus.LaneLimits{Weight: 1}}, info, "a lane that does not exist reads as empty")
		page, err := b.Browse(ctx, name, &bus.BrowseOpts{Lane: "nobody"})
		require.NoError(t, err)
		require.Empty(t, page.IDs)
		require.Empty(t, scanAll(t, c, "{"+name+"}"), "reading writes nothing")
	})
}

// TestLaneLimitsString: the phrases the CLI and the dashboard print for limits.
func TestLaneLimitsString(t *testing.T) {
	require.Equal(t, "none", bus.Rate{}.String())
	require.Equal(t, "200/1s burst 20", bus.Rate{Limit: 200, Burst: 20}.String())
	require.Equal(t, "5/1m0s", bus.Rate{Limit: 5, Per: time.Minute}.String())
	require.Equal(t, "none", bus.LaneLimits{}.String())
	require.Equal(t, "cap 5, rate 200/1s burst 20, weight 2",
		bus.LaneLimits{Cap: 5, Rate: bus.Rate{Limit: 200, Burst: 20}, Weight: 2}.String())
	require.Equal(t, "weight 3", bus.LaneLimits{Weight: 3}.String())
}
