package bus_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

func ids(out []bus.Enqueued) []keys.JobID {
	r := make([]keys.JobID, len(out))
	for i, e := range out {
		r[i] = e.ID
	}
	return r
}

func jobIDs(jobs []bus.Job) []keys.JobID {
	r := make([]keys.JobID, len(jobs))
	for i, j := range jobs {
		r[i] = j.ID
	}
	return r
}

// TestClaimMany: a claim of N takes the N oldest in mint order, each with its own token and
// payload; a claim of more than is pending takes the rest; then nothing.
func TestClaimMany(t *testing.T) {
	t.Parallel()
	valkeytest.OnTargets(t, func(t *testing.T, tg valkeytest.Target) {
		ctx, _, b, name, _ := setup(t, tg, bus.Config{})
		out, err := b.EnqueueBatch(ctx, name, payloads(10, "p"), nil)
		require.NoError(t, err)
		all := ids(out)

		first, err := b.Claim(ctx, name, &bus.ClaimOpts{Count: 4})
		require.NoError(t, err)
		require.Equal(t, all[:4], jobIDs(first))
		for i, j := range first {
			require.Equal(t, bus.Job{Queue: name, ID: all[i], Token: 1, Payload: []byte("p" + string(rune('0'+i)))}, j)
		}
		rest, err := b.Claim(ctx, name, &bus.ClaimOpts{Count: 100})
		require.NoError(t, err)
		require.Equal(t, all[4:], jobIDs(rest))
		none, err := b.Claim(ctx, name, &bus.ClaimOpts{Count: 5})
		require.NoError(t, err)
		require.Empty(t, none)
		counts, err := b.Counts(ctx, name)
		require.NoError(t, err)
		require.Equal(t, bus.Counts{Active: 10}, counts)
	})
}

// TestPauseResume: a paused queue claims nothing (ErrPaused) and pushes no wake marker while
// producers keep enqueueing; resume wakes idle workers; both are idempotent.
func TestPauseResume(t *testing.T) {
	t.Parallel()
	valkeytest.OnTargets(t, func(t *testing.T, tg valkeytest.Target) {
		ctx, c, b, name, q := setup(t, tg, bus.Config{})
		wakeLen := func() int64 {
			n, err := c.Do(ctx, c.B().Llen().Key(q.Wake()).Build()).AsInt64()
			require.NoError(t, err)
			return n
		}

		require.NoError(t, b.Pause(ctx, name))
		require.NoError(t, b.Pause(ctx, name))
		_, err := b.Enqueue(ctx, name, []byte("while paused"), nil)
		require.NoError(t, err)
		require.Zero(t, wakeLen(), "no marker while paused")
		jobs, err := b.Claim(ctx, name, nil)
		require.ErrorIs(t, err, bus.ErrPaused)
		require.Empty(t, jobs)
		counts, err := b.Counts(ctx, name)
		require.NoError(t, err)
		require.Equal(t, bus.Counts{Pending: 1, Paused: true}, counts)

		require.NoError(t, b.Resume(ctx, name))
		require.Equal(t, int64(1), wakeLen(), "resume wakes idle workers")
		require.NoError(t, b.Resume(ctx, name))
		require.Equal(t, int64(1), wakeLen(), "a second resume changes nothing")
		jobs, err = b.Claim(ctx, name, nil)
		require.NoError(t, err)
		require.Len(t, jobs, 1)

		// Scheduled work enqueued while paused: resume pushes "s", so idle workers read the
		// schedule's head at once instead of at their wake timeout.
		_, err = c.Do(ctx, c.B().Del().Key(q.Wake()).Build()).AsInt64()
		require.NoError(t, err)
		require.NoError(t, b.Pause(ctx, name))
		_, err = b.Enqueue(ctx, name, []byte("later"), &bus.EnqueueOpts{Delay: time.Hour})
		require.NoError(t, err)
		require.Zero(t, wakeLen(), "no marker while paused")
		require.NoError(t, b.Resume(ctx, name))
		marker, err := c.Do(ctx, c.B().Lrange().Key(q.Wake()).Start(0).Stop(-1).Build()).AsStrSlice()
		require.NoError(t, err)
		require.Equal(t, []string{"s"}, marker, "resume with only scheduled work pushes s")
	})
}

// TestWakeMarker: enqueue pushes one marker per call, trimmed to 16; a scheduled job pushes
// "s" when it moves the schedule's head earlier (or the schedule was empty) and nothing
// otherwise, and "1" once promote makes it pending; an idle worker blocked on the list wakes on
// enqueue.
func TestWakeMarker(t *testing.T) {
	t.Parallel()
	valkeytest.OnTargets(t, func(t *testing.T, tg valkeytest.Target) {
		ctx, c, b, name, q := setup(t, tg, bus.Config{})
		wake := func() []string {
			l, err := c.Do(ctx, c.B().Lrange().Key(q.Wake()).Start(0).Stop(-1).Build()).AsStrSlice()
			require.NoError(t, err)
			return l
		}

		for range 20 {
			_, err := b.Enqueue(ctx, name, []byte("w"), nil)
			require.NoError(t, err)
		}
		require.Equal(t, slices.Repeat([]string{"1"}, 16), wake(), "trimmed to 16 markers")
		require.NoError(t, c.Do(ctx, c.B().Del().Key(q.Wake()).Build()).Error())

		_, err := b.Enqueue(ctx, name, []byte("last"), &bus.EnqueueOpts{Delay: time.Hour})
		require.NoError(t, err)
		require.Equal(t, []string{"s"}, wake(), "a job into an empty schedule moves its head")
		_, err = b.Enqueue(ctx, name, []byte("later still"), &bus.EnqueueOpts{Delay: 2 * time.Hour})
		require.NoError(t, err)
		require.Equal(t, []string{"s"}, wake(), "a job behind the schedule's head wakes nobody")
		_, err = b.Enqueue(ctx, name, []byte("later"), &bus.EnqueueOpts{Delay: 20 * time.Millisecond})
		require.NoError(t, err)
		require.Equal(t, []string{"s", "s"}, wake(), "a job before the schedule's head moves it earlier")
		require.NoError(t, c.Do(ctx, c.B().Del().Key(q.Wake()).Build()).Error())
		valkeytest.Eventually(t, 10*time.Second, "promote to move the job", func() bool {
			moved, err := b.Promote(ctx, name, nil)
			require.NoError(t, err)
			return len(moved) == 1
		})
		require.Equal(t, []string{"1"}, wake(), "promote wakes")
		require.NoError(t, c.Do(ctx, c.B().Del().Key(q.Wake()).Build()).Error())

		// The worker's read side: BLPOP with a timeout returns when an enqueue lands.
		got := make(chan []string, 1)
		go func() {
			v, _ := c.Do(ctx, c.B().Blpop().Key(q.Wake()).Timeout(10).Build()).AsStrSlice()
			got <- v
		}()
		valkeytest.Eventually(t, 10*time.Second, "the worker to block", func() bool {
			for _, node := range c.Nodes() {
				list, err := node.Do(ctx, node.B().ClientList().TypeNormal().Build()).ToString()
				require.NoError(t, err)
				if strings.Contains(list, "cmd=blpop") {
					return true
				}
			}
			return false
		})
		_, err = b.Enqueue(ctx, name, []byte("wake up"), nil)
		require.NoError(t, err)
		select {
		case v := <-got:
			require.Equal(t, []string{q.Wake(), "1"}, v)
		case <-time.After(10 * time.Second):
			t.Fatal("the blocked worker did not wake")
		}
	})
}

// TestExtend: a heartbeat renews every lease it still holds in one call and names, with the
// reason, each one it lost; lost jobs are not written.
func TestExtend(t *testing.T) {
	t.Parallel()
	valkeytest.OnTargets(t, func(t *testing.T, tg valkeytest.Target) {
		ctx, c, b, name, q := setup(t, tg, bus.Config{})
		_, err := b.EnqueueBatch(ctx, name, payloads(4, "e"), nil)
		require.NoError(t, err)
		jobs, err := b.Claim(ctx, name, &bus.ClaimOpts{Count: 4, Lease: 10 * time.Second})
		require.NoError(t, err)
		require.Len(t, jobs, 4)

		before := serverMillis(t, c)
		deadline, lost, err := b.ExtendMany(ctx, jobs, &bus.ExtendOpts{Lease: time.Minute})
		require.NoError(t, err)
		require.Empty(t, lost)
		require.GreaterOrEqual(t, deadline.UnixMilli(), before+time.Minute.Milliseconds())
		for _, j := range jobs {
			s, ok := score(t, c, q.Active(), j.ID)
			require.True(t, ok)
			require.Equal(t, deadline.UnixMilli(), s)
		}

		require.NoError(t, b.Complete(ctx, jobs[0], nil)) // no row
		_, err = b.Fail(ctx, jobs[1], nil)                // not active: back in pending
		require.NoError(t, err)
		stale := jobs[3]
		stale.Token = 99 // token mismatch
		old, _ := score(t, c, q.Active(), jobs[3].ID)
		deadline2, lost, err := b.ExtendMany(ctx, []bus.Job{jobs[0], jobs[1], jobs[2], stale}, &bus.ExtendOpts{Lease: 2 * time.Minute})
		require.NoError(t, err)
		require.Len(t, lost, 3)
		for i, want := range []struct {
			id     keys.JobID
			reason bus.StaleReason
		}{{jobs[0].ID, bus.NoRow}, {jobs[1].ID, bus.NotActive}, {jobs[3].ID, bus.TokenMismatch}} {
			require.Equal(t, want.id, lost[i].ID)
			require.Equal(t, want.reason, lost[i].Reason)
			require.ErrorIs(t, lost[i], bus.ErrStale)
		}
		s, _ := score(t, c, q.Active(), jobs[2].ID)
		require.Equal(t, deadline2.UnixMilli(), s, "the held lease was renewed")
		s, _ = score(t, c, q.Active(), jobs[3].ID)
		require.Equal(t, old, s, "the lost one was not written")

		_, err = b.Extend(ctx, stale, nil)
		var se *bus.StaleError
		require.ErrorAs(t, err, &se)
		require.Equal(t, bus.TokenMismatch, se.Reason)
		_, _, err = b.ExtendMany(ctx, []bus.Job{jobs[2], {Queue: name + "x", ID: jobs[3].ID, Token: 1}}, nil)
		require.ErrorIs(t, err, bus.ErrInvalid, "one queue per call")
	})
}

// TestSnooze: snooze hands the job back without a failure: never to dead, attempts kept, the
// old token fenced out.
func TestSnooze(t *testing.T) {
	t.Parallel()
	valkeytest.OnTargets(t, func(t *testing.T, tg valkeytest.Target) {
		ctx, c, b, name, q := setup(t, tg, bus.Config{MaxAttempts: 1})
		enq, err := b.Enqueue(ctx, name, []byte("zz"), nil)
		require.NoError(t, err)
		jobs, err := b.Claim(ctx, name, nil)
		require.NoError(t, err)

		before := serverMillis(t, c)
		out, err := b.Snooze(ctx, jobs[0], time.Hour, nil)
		require.NoError(t, err)
		require.Equal(t, bus.StateScheduled, out.State, "not dead, although max attempts is 1")
		require.GreaterOrEqual(t, out.At.UnixMilli(), before+time.Hour.Milliseconds())
		require.Equal(t, map[string]string{"state": "scheduled", "attempts": "1", "payload": "zz"}, row(t, c, q, enq.ID))
		err = b.Complete(ctx, jobs[0], nil)
		var se *bus.StaleError
		require.ErrorAs(t, err, &se)
		require.Equal(t, bus.NotActive, se.Reason)

		// Due now (by hand), claimed again with token 2, snoozed to pending at once.
		require.NoError(t, c.Do(ctx, c.B().Zadd().Key(q.Schedule()).ScoreMember().ScoreMember(1, enq.ID.String()).Build()).Error())
		jobs, err = b.Claim(ctx, name, nil)
		require.NoError(t, err)
		require.Equal(t, int64(2), jobs[0].Token)
		out, err = b.Snooze(ctx, jobs[0], 0, nil)
		require.NoError(t, err)
		require.Equal(t, bus.StatePending, out.State)
		require.Equal(t, map[string]string{"state": "pending", "attempts": "2", "payload": "zz"}, row(t, c, q, enq.ID))
	})
}

// TestCancel: waiting jobs are cancelled (row and id gone); claimed and dead ones are refused
// with their state and left alone; an unknown job is ErrNotFound.
func TestCancel(t *testing.T) {
	t.Parallel()
	valkeytest.OnTargets(t, func(t *testing.T, tg valkeytest.Target) {
		ctx, c, b, name, q := setup(t, tg, bus.Config{})
		pending, err := b.Enqueue(ctx, name, []byte("p"), nil)
		require.NoError(t, err)
		scheduled, err := b.Enqueue(ctx, name, []byte("s"), &bus.EnqueueOpts{At: time.Now().Add(time.Hour)})
		require.NoError(t, err)
		active, err := b.Enqueue(ctx, name, []byte("a"), nil)
		require.NoError(t, err)
		dead, err := b.Enqueue(ctx, name, []byte("d"), nil)
		require.NoError(t, err)
		jobs, err := b.Claim(ctx, name, &bus.ClaimOpts{Count: 3})
		require.NoError(t, err)
		require.Equal(t, []keys.JobID{pending.ID, active.ID, dead.ID}, jobIDs(jobs))
		_, err = b.Fail(ctx, jobs[0], &bus.FailOpts{Backoff: 0}) // pending again
		require.NoError(t, err)
		_, err = b.Fail(ctx, jobs[2], &bus.FailOpts{MaxAttempts: 1})
		require.NoError(t, err)

		for _, tc := range []struct {
			name string
			id   keys.JobID
			want bus.State
		}{{"pending", pending.ID, bus.StatePending}, {"scheduled", scheduled.ID, bus.StateScheduled}} {
			got, err := b.Cancel(ctx, name, tc.id)
			require.NoError(t, err, tc.name)
			require.Equal(t, tc.want, got, tc.name)
			require.Empty(t, scanAll(t, c, tc.id.String()), "%s: nothing remains", tc.name)
		}
		// A claimed job is marked cancelling in place; a second cancel changes nothing.
		got, err := b.Cancel(ctx, name, active.ID)
		require.NoError(t, err)
		require.Equal(t, bus.StateActive, got)
		require.Equal(t, map[string]string{"state": "cancelling", "attempts": "1", "payload": "a"}, row(t, c, q, active.ID))
		got, err = b.Cancel(ctx, name, active.ID)
		require.NoError(t, err)
		require.Equal(t, bus.StateCancelling, got)
		info, err := b.Lookup(ctx, name, active.ID)
		require.NoError(t, err)
		require.Equal(t, bus.StateCancelling, info.State)
		require.Equal(t, keys.Active, info.Set)
		// Its holder's extend is refused as cancelled.
		_, err = b.Extend(ctx, jobs[1], nil)
		require.ErrorIs(t, err, bus.ErrStale)
		require.ErrorIs(t, err, bus.ErrCancelled)
		var stale *bus.StaleError
		require.ErrorAs(t, err, &stale)
		require.Equal(t, bus.Cancelled, stale.Reason)

		before := row(t, c, q, dead.ID)
		_, err = b.Cancel(ctx, name, dead.ID)
		var se *bus.StateError
		require.ErrorAs(t, err, &se)
		require.ErrorIs(t, err, bus.ErrState)
		require.Equal(t, bus.StateDead, se.State)
		require.Equal(t, dead.ID, se.ID)
		require.Equal(t, before, row(t, c, q, dead.ID), "dead: untouched")
		_, err = b.Cancel(ctx, name, keys.NewJobID())
		require.ErrorIs(t, err, bus.ErrNotFound)
	})
}

// TestDeadOperations: retry and purge by ids are all or nothing; purge by limit takes the
// oldest; browse reads dead newest-first.
func TestDeadOperations(t *testing.T) {
	t.Parallel()
	valkeytest.OnTargets(t, func(t *testing.T, tg valkeytest.Target) {
		ctx, _, b, name, _ := setup(t, tg, bus.Config{MaxAttempts: 1})
		out, err := b.EnqueueBatch(ctx, name, payloads(5, "d"), nil)
		require.NoError(t, err)
		all := ids(out)
		jobs, err := b.Claim(ctx, name, &bus.ClaimOpts{Count: 4})
		require.NoError(t, err)
		for _, j := range jobs {
			o, err := b.Fail(ctx, j, nil)
			require.NoError(t, err)
			require.Equal(t, bus.StateDead, o.State)
		}
		dead := all[:4]
		page, err := b.Browse(ctx, name, &bus.BrowseOpts{Set: keys.Dead, Newest: true})
		require.NoError(t, err)
		require.Equal(t, []keys.JobID{dead[3], dead[2], dead[1], dead[0]}, page.IDs)

		// all[4] is pending: retrying it with a dead one moves neither.
		_, err = b.RetryDead(ctx, name, dead[0], all[4])
		var se *bus.StateError
		require.ErrorAs(t, err, &se)
		require.Equal(t, all[4], se.ID)
		require.Equal(t, bus.StatePending, se.State)
		_, err = b.PurgeDead(ctx, name, &bus.PurgeOpts{IDs: []keys.JobID{dead[0], all[4]}})
		require.ErrorIs(t, err, bus.ErrState)
		counts, err := b.Counts(ctx, name)
		require.NoError(t, err)
		require.Equal(t, bus.Counts{Pending: 1, Dead: 4}, counts, "all or nothing")

		n, err := b.RetryDead(ctx, name, dead[0], dead[1])
		require.NoError(t, err)
		require.Equal(t, 2, n)
		purged, err := b.PurgeDead(ctx, name, &bus.PurgeOpts{IDs: []keys.JobID{dead[3]}})
		require.NoError(t, err)
		require.Equal(t, []keys.JobID{dead[3]}, purged)
		purged, err = b.PurgeDead(ctx, name, &bus.PurgeOpts{Limit: 10})
		require.NoError(t, err)
		require.Equal(t, []keys.JobID{dead[2]}, purged)
		purged, err = b.PurgeDead(ctx, name, nil)
		require.NoError(t, err)
		require.Empty(t, purged)
		counts, err = b.Counts(ctx, name)
		require.NoError(t, err)
		require.Equal(t, bus.Counts{Pending: 3}, counts)
	})
}

// TestBrowse: pages with a cursor, oldest-first and newest-first, cover the set exactly once;
// a mint-time range selects by the ids alone.
func TestBrowse(t *testing.T) {
	t.Parallel()
	valkeytest.OnTargets(t, func(t *testing.T, tg valkeytest.Target) {
		ctx, _, b, name, _ := setup(t, tg, bus.Config{})
		// Five batches of five, each minted in a later millisecond than the one before.
		var batches [][]keys.JobID
		for range 5 {
			start := time.Now().UnixMilli()
			valkeytest.Eventually(t, time.Second, "the next millisecond", func() bool { return time.Now().UnixMilli() > start })
			out, err := b.EnqueueBatch(ctx, name, payloads(5, "b"), nil)
			require.NoError(t, err)
			batches = append(batches, ids(out))
		}
		all := slices.Concat(batches...)

		for _, newest := range []bool{false, true} {
			var got []keys.JobID
			var cursor keys.JobID
			pages := 0
			for {
				p, err := b.Browse(ctx, name, &bus.BrowseOpts{Newest: newest, After: cursor, Limit: 7})
				require.NoError(t, err)
				got = append(got, p.IDs...)
				pages++
				if p.Next.IsZero() {
					break
				}
				cursor = p.Next
			}
			want := slices.Clone(all)
			if newest {
				slices.Reverse(want)
			}
			require.Equal(t, want, got, "newest=%v", newest)
			require.Equal(t, 4, pages, "25 ids in pages of 7")
		}

		from, to := batches[1][0].Time(), batches[3][0].Time()
		p, err := b.Browse(ctx, name, &bus.BrowseOpts{From: from, To: to})
		require.NoError(t, err)
		require.Equal(t, slices.Concat(batches[1], batches[2]), p.IDs, "minted in [from, to)")
		p, err = b.Browse(ctx, name, &bus.BrowseOpts{From: from, To: to, Newest: true, Limit: 3})
		require.NoError(t, err)
		require.Equal(t, []keys.JobID{batches[2][4], batches[2][3], batches[2][2]}, p.IDs)
		p, err = b.Browse(ctx, name, &bus.BrowseOpts{From: from, To: to, Newest: true, After: p.Next, Limit: 10})
		require.NoError(t, err)
		require.Equal(t, []keys.JobID{batches[2][1], batches[2][0], batches[1][4], batches[1][3], batches[1][2], batches[1][1], batches[1][0]}, p.IDs)
		require.True(t, p.Next.IsZero())
		p, err = b.Browse(ctx, name, &bus.BrowseOpts{From: batches[4][0].Time()})
		require.NoError(t, err)
		require.Equal(t, batches[4], p.IDs)

		_, err = b.Browse(ctx, name, &bus.BrowseOpts{Set: keys.Meta})
		require.ErrorIs(t, err, bus.ErrInvalid, "meta is not a set of jobs")
	})
}

// TestCompleteAndClaim: one round trip retires the held job and claims the next ones; when
// the complete is refused the claim still happens and both outcomes come back.
func TestCompleteAndClaim(t *testing.T) {
	t.Parallel()
	valkeytest.OnTargets(t, func(t *testing.T, tg valkeytest.Target) {
		ctx, c, b, name, _ := setup(t, tg, bus.Config{})
		out, err := b.EnqueueBatch(ctx, name, payloads(5, "c"), nil)
		require.NoError(t, err)
		all := ids(out)
		jobs, err := b.Claim(ctx, name, nil)
		require.NoError(t, err)

		next, err := b.CompleteAndClaim(ctx, jobs[0], &bus.ClaimOpts{Count: 2})
		require.NoError(t, err)
		require.Equal(t, all[1:3], jobIDs(next))
		require.Empty(t, scanAll(t, c, all[0].String()), "the completed job is gone")

		stale := next[0]
		stale.Token = 7
		more, err := b.CompleteAndClaim(ctx, stale, &bus.ClaimOpts{Count: 2})
		require.ErrorIs(t, err, bus.ErrStale)
		require.Equal(t, all[3:5], jobIDs(more), "the claim ran anyway")
		counts, err := b.Counts(ctx, name)
		require.NoError(t, err)
		require.Equal(t, bus.Counts{Active: 4}, counts)
	})
}

// TestClaimPromotesFirst: a claim promotes due scheduled jobs before it claims, at most
// PromoteLimit of them, and none with a negative limit; jobs not yet due stay scheduled.
func TestClaimPromotesFirst(t *testing.T) {
	t.Parallel()
	valkeytest.OnTargets(t, func(t *testing.T, tg valkeytest.Target) {
		ctx, c, b, name, _ := setup(t, tg, bus.Config{})
		start := serverMillis(t, c)
		due, err := b.EnqueueBatch(ctx, name, payloads(5, "due"), &bus.EnqueueOpts{Delay: 20 * time.Millisecond})
		require.NoError(t, err)
		_, err = b.Enqueue(ctx, name, []byte("later"), &bus.EnqueueOpts{At: time.Now().Add(time.Hour)})
		require.NoError(t, err)
		counts, err := b.Counts(ctx, name)
		require.NoError(t, err)
		require.Equal(t, bus.Counts{Scheduled: 6}, counts)
		info, err := b.Lookup(ctx, name, due[4].ID)
		require.NoError(t, err)
		require.GreaterOrEqual(t, info.At.UnixMilli(), start+20)
		valkeytest.Eventually(t, 10*time.Second, "the run-at to pass", func() bool { return serverMillis(t, c) >= info.At.UnixMilli() })

		none, err := b.Claim(ctx, name, &bus.ClaimOpts{Count: 10, PromoteLimit: -1})
		require.NoError(t, err)
		require.Empty(t, none, "no promotion asked: nothing pending")
		two, err := b.Claim(ctx, name, &bus.ClaimOpts{Count: 10, PromoteLimit: 2})
		require.NoError(t, err)
		require.Equal(t, ids(due)[:2], jobIDs(two), "bounded by the limit, oldest run-at first")
		rest, err := b.Claim(ctx, name, &bus.ClaimOpts{Count: 10})
		require.NoError(t, err)
		require.Equal(t, ids(due)[2:], jobIDs(rest))
		counts, err = b.Counts(ctx, name)
		require.NoError(t, err)
		require.Equal(t, bus.Counts{Active: 5, Scheduled: 1}, counts, "the job an hour out stays")
	})
}
