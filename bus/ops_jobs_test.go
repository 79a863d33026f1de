package bus_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

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
