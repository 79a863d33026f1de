package bus_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// TestCrashDrill is seed 000's drill: a 40 ms lease whose holder stops without completing;
// reap returns the job after the deadline; the next claim mints token 2 ("one job, two lives,
// one counter"); the zombie's complete with token 1 and a complete with token 99 answer
// EMQSTALE and the row survives; the holder of token 2 retires the row and nothing remains.
func TestCrashDrill(t *testing.T) {
	t.Parallel()
	valkeytest.OnTargets(t, func(t *testing.T, tg valkeytest.Target) {
		ctx, c, b, name, q := setup(t, tg, bus.Config{})

		enq, err := b.Enqueue(ctx, name, []byte("drill"), nil)
		require.NoError(t, err)

		before := serverMillis(t, c)
		first, err := b.Claim(ctx, name, &bus.ClaimOpts{Lease: 40 * time.Millisecond})
		require.NoError(t, err)
		require.Len(t, first, 1)
		zombie := first[0]
		require.Equal(t, enq.ID, zombie.ID)
		require.Equal(t, int64(1), zombie.Token)
		deadline, ok := score(t, c, q.Active(), zombie.ID)
		require.True(t, ok)
		require.GreaterOrEqual(t, deadline, before+40)

		// The holder stops. Reap until the job comes back; it never comes back early.
		var reaped bus.Reaped
		valkeytest.Eventually(t, 10*time.Second, "reap to return the job", func() bool {
			reaped, err = b.Reap(ctx, name, nil)
			require.NoError(t, err)
			return len(reaped.Requeued) > 0
		})
		require.GreaterOrEqual(t, serverMillis(t, c), deadline, "reaped only after the deadline")
		require.Equal(t, []keys.JobID{zombie.ID}, reaped.Requeued)
		require.Empty(t, reaped.Dead)
		require.Equal(t, map[string]string{"state": "pending", "attempts": "1", "payload": "drill"}, row(t, c, q, zombie.ID))

		second, err := b.Claim(ctx, name, &bus.ClaimOpts{Lease: time.Minute})
		require.NoError(t, err)
		require.Len(t, second, 1)
		holder := second[0]
		require.Equal(t, zombie.ID, holder.ID, "one job")
		require.Equal(t, int64(2), holder.Token, "two lives, one counter")

		for _, tc := range []struct {
			name  string
			token int64
		}{{"zombie token 1", 1}, {"token 99", 99}} {
			stale := zombie
			stale.Token = tc.token
			err := b.Complete(ctx, stale, nil)
			require.ErrorIs(t, err, bus.ErrStale, tc.name)
			var se *bus.StaleError
			require.ErrorAs(t, err, &se, tc.name)
			require.Equal(t, bus.TokenMismatch, se.Reason, tc.name)
			require.Equal(t, map[string]string{"state": "active", "attempts": "2", "payload": "drill"}, row(t, c, q, zombie.ID), "%s: the row survives", tc.name)
		}

		require.NoError(t, b.Complete(ctx, holder, nil))
		require.Empty(t, scanAll(t, c, zombie.ID.String()), "nothing of the job remains in any key")
		for _, k := range []string{q.Pending(), q.Active(), q.Schedule(), q.Dead()} {
			_, ok := score(t, c, k, zombie.ID)
			require.False(t, ok, k)
		}
		err = b.Complete(ctx, holder, nil)
		var se *bus.StaleError
		require.ErrorAs(t, err, &se)
		require.Equal(t, bus.NoRow, se.Reason, "a second complete finds no row")
	})
}

// TestOrderDividend is seed 004's J4: 301 jobs pending; newest-first browsing returns the last
// five in reverse mint order; oldest-first puts the very first job at the head; SCAN finds only
// grammar keys; no second index anywhere.
func TestOrderDividend(t *testing.T) {
	t.Parallel()
	valkeytest.OnTargets(t, func(t *testing.T, tg valkeytest.Target) {
		ctx, c, b, name, _ := setup(t, tg, bus.Config{})

		var ids []keys.JobID
		for i := range 3 { // three batches, so mint order spans calls too
			n := []int{1, 150, 150}[i]
			out, err := b.EnqueueBatch(ctx, name, payloads(n, "j"+strconv.Itoa(i)+"-"), nil)
			require.NoError(t, err)
			for _, e := range out {
				ids = append(ids, e.ID)
			}
		}
		require.Len(t, ids, 301)
		require.True(t, slices.IsSortedFunc(ids, func(a, b keys.JobID) int { return compare(a.String(), b.String()) }), "ids are minted in order")

		counts, err := b.Counts(ctx, name)
		require.NoError(t, err)
		require.Equal(t, int64(301), counts.Pending)

		newest, err := b.Browse(ctx, name, &bus.BrowseOpts{Newest: true, Limit: 5})
		require.NoError(t, err)
		require.Equal(t, []keys.JobID{ids[300], ids[299], ids[298], ids[297], ids[296]}, newest.IDs, "the last five minted, in reverse mint order")
		oldest, err := b.Browse(ctx, name, &bus.BrowseOpts{Limit: 1})
		require.NoError(t, err)
		require.Equal(t, []keys.JobID{ids[0]}, oldest.IDs, "the very first job at the head")

		// Every key that names the queue or one of its jobs is a grammar key of this queue: no
		// second index anywhere.
		mine := map[string]bool{}
		for _, id := range ids {
			mine[id.String()] = true
		}
		var found []string
		for _, k := range scanAll(t, c, "{"+name+"}", "JOB_") {
			if i := strings.Index(k, "JOB_"); strings.Contains(k, "{"+name+"}") || i >= 0 && i+keys.JobIDLen <= len(k) && mine[k[i:i+keys.JobIDLen]] {
				found = append(found, k)
			}
		}
		require.Len(t, found, 301+2, "301 rows, pending, and the wake list")
		types := map[keys.Type]int{}
		for _, k := range found {
			parsed, err := keys.Parse(k)
			require.NoError(t, err, k)
			require.Equal(t, name, parsed.Name)
			types[parsed.Type]++
		}
		require.Equal(t, map[keys.Type]int{keys.Job: 301, keys.Pending: 1, keys.Wake: 1}, types)
	})
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestRowShape walks one job through every state: the row has exactly the three fields at
// each (pending, active, scheduled, dead, cancelling), whatever lives beside it (its failure
// history, its result); pending and dead scores are 0; an active score is the server's TIME
// at the claim plus the lease, and cancelling keeps it; a schedule score is the run-at. The
// keys of the job are its row and its history while it lives, and only its result once it is
// retired with one.
func TestRowShape(t *testing.T) {
	t.Parallel()
	valkeytest.OnTargets(t, func(t *testing.T, tg valkeytest.Target) {
		ctx, c, b, name, q := setup(t, tg, bus.Config{})
		enq, err := b.Enqueue(ctx, name, []byte("shape"), nil)
		require.NoError(t, err)
		id := enq.ID
		shape := func(state string, attempts int) {
			t.Helper()
			require.Equal(t, map[string]string{"state": state, "attempts": strconv.Itoa(attempts), "payload": "shape"}, row(t, c, q, id))
		}
		shape("pending", 0)
		s, ok := score(t, c, q.Pending(), id)
		require.True(t, ok)
		require.Zero(t, s)

		const lease = 5 * time.Second
		before := serverMillis(t, c)
		jobs, err := b.Claim(ctx, name, &bus.ClaimOpts{Lease: lease})
		after := serverMillis(t, c)
		require.NoError(t, err)
		require.Len(t, jobs, 1)
		shape("active", 1)
		s, ok = score(t, c, q.Active(), id)
		require.True(t, ok)
		require.GreaterOrEqual(t, s, before+lease.Milliseconds())
		require.LessOrEqual(t, s, after+lease.Milliseconds())
		info, err := b.Lookup(ctx, name, id)
		require.NoError(t, err)
		require.Equal(t, keys.Active, info.Set)
		require.Equal(t, s, info.At.UnixMilli())

		before = serverMillis(t, c)
		out, err := b.Fail(ctx, jobs[0], &bus.FailOpts{Backoff: time.Hour})
		require.NoError(t, err)
		require.Equal(t, bus.StateScheduled, out.State)
		shape("scheduled", 1)
		s, ok = score(t, c, q.Schedule(), id)
		require.True(t, ok)
		require.Equal(t, out.At.UnixMilli(), s)
		require.GreaterOrEqual(t, s, before+time.Hour.Milliseconds())

		// Make it due by hand (an operator's ZADD) rather than wait an hour.
		require.NoError(t, c.Do(ctx, c.B().Zadd().Key(q.Schedule()).ScoreMember().ScoreMember(1, id.String()).Build()).Error())
		jobs, err = b.Claim(ctx, name, nil) // promotes first
		require.NoError(t, err)
		require.Len(t, jobs, 1)
		require.Equal(t, int64(2), jobs[0].Token)
		shape("active", 2)

		out, err = b.Fail(ctx, jobs[0], &bus.FailOpts{MaxAttempts: 2})
		require.NoError(t, err)
		require.Equal(t, bus.StateDead, out.State)
		shape("dead", 2)
		s, ok = score(t, c, q.Dead(), id)
		require.True(t, ok)
		require.Zero(t, s)
		for _, k := range []string{q.Pending(), q.Active(), q.Schedule()} {
			_, ok := score(t, c, k, id)
			require.False(t, ok, "only dead holds it, not %s", k)
		}
		// Beside the row, never in it: the failure history, a list of the two failures.
		rowKey, err := q.Job(id)
		require.NoError(t, err)
		errKey, err := q.Errors(id)
		require.NoError(t, err)
		resKey, err := q.Result(id)
		require.NoError(t, err)
		jobKeys := func() []string {
			t.Helper()
			ks := scanAll(t, c, id.String())
			slices.Sort(ks)
			return ks
		}
		require.Equal(t, []string{errKey, rowKey}, jobKeys())
		n, err := c.Do(ctx, c.B().Llen().Key(errKey).Build()).AsInt64()
		require.NoError(t, err)
		require.Equal(t, int64(2), n)

		// Retried, claimed, cancelled while claimed: cancelling keeps the lease and the shape.
		_, err = b.RetryDead(ctx, name, id)
		require.NoError(t, err)
		shape("pending", 2)
		jobs, err = b.Claim(ctx, name, &bus.ClaimOpts{Lease: lease})
		require.NoError(t, err)
		require.Len(t, jobs, 1)
		shape("active", 3)
		deadline, ok := score(t, c, q.Active(), id)
		require.True(t, ok)
		state, err := b.Cancel(ctx, name, id)
		require.NoError(t, err)
		require.Equal(t, bus.StateActive, state)
		shape("cancelling", 3)
		s, ok = score(t, c, q.Active(), id)
		require.True(t, ok)
		require.Equal(t, deadline, s, "cancelling keeps the lease deadline")
		_, err = b.Extend(ctx, jobs[0], nil)
		require.ErrorIs(t, err, bus.ErrCancelled)
		shape("cancelling", 3)
		out, err = b.Fail(ctx, jobs[0], &bus.FailOpts{Backoff: time.Hour, Error: "stopped"})
		require.NoError(t, err)
		require.Equal(t, bus.StateDead, out.State, "a cancelled job goes to dead, whatever the backoff")
		shape("dead", 3)
		info, err = b.Lookup(ctx, name, id)
		require.NoError(t, err)
		require.Len(t, info.Failures, 3)
		require.Equal(t, "cancelled", info.Failures[2].Error)

		// Retried again and completed with a result: the row and the history go, the result
		// alone remains.
		_, err = b.RetryDead(ctx, name, id)
		require.NoError(t, err)
		shape("pending", 3)
		jobs, err = b.Claim(ctx, name, nil)
		require.NoError(t, err)
		require.Len(t, jobs, 1)
		shape("active", 4)
		require.NoError(t, b.Complete(ctx, jobs[0], &bus.CompleteOpts{Result: []byte("done"), ResultTTL: time.Minute}))
		require.Equal(t, []string{resKey}, jobKeys(), "retired: only the result it asked for")
		info, err = b.Lookup(ctx, name, id)
		require.NoError(t, err)
		require.Equal(t, bus.StateRetired, info.State)
		require.Equal(t, int64(4), info.Attempts)
		require.Equal(t, []byte("done"), info.Result)
	})
}
