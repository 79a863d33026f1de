package bus_test

import (
	"cmp"
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// browseAll pages through a set of queue with the given page size, following the cursor, and
// returns every entry in page order and how many pages it took.
func browseAll(t *testing.T, b *bus.Bus, queue string, set keys.Type, newest bool, limit int) ([]bus.Entry, int) {
	t.Helper()
	var out []bus.Entry
	o := &bus.BrowseOpts{Set: set, Newest: newest, Limit: limit}
	for pages := 1; ; pages++ {
		p, err := b.Browse(context.Background(), queue, o)
		require.NoError(t, err)
		require.Len(t, p.Entries, len(p.IDs))
		for i, e := range p.Entries {
			require.Equal(t, p.IDs[i], e.ID)
		}
		out = append(out, p.Entries...)
		if p.Next.IsZero() {
			require.True(t, p.NextAt.IsZero())
			return out, pages
		}
		require.Len(t, p.Entries, limit, "a page before the last is full")
		o.After, o.AfterAt = p.Next, p.NextAt
	}
}

// zsetEntries reads a set with its scores, in Valkey's order (score, then id).
func zsetEntries(t *testing.T, c valkey.Client, key string) []bus.Entry {
	t.Helper()
	zs, err := c.Do(context.Background(), c.B().Zrange().Key(key).Min("0").Max("-1").Withscores().Build()).AsZScores()
	require.NoError(t, err)
	out := make([]bus.Entry, len(zs))
	for i, z := range zs {
		id, err := keys.ParseJobID(z.Member)
		require.NoError(t, err)
		out[i] = bus.Entry{ID: id, At: time.UnixMilli(int64(z.Score))}
	}
	return out
}

// byScore is the order Browse lists active and schedule in: by At, ties by id.
func byScore(a, b bus.Entry) int {
	if c := a.At.Compare(b.At); c != 0 {
		return c
	}
	return cmp.Compare(a.ID.String(), b.ID.String())
}

// TestBrowseSchedule: 1,000 scheduled jobs, in batches that share a run-at, page through
// oldest-first and newest-first in pages of 7: each job once, in run-at order (ties by id),
// each with the run-at schedule holds.
func TestBrowseSchedule(t *testing.T) {
	t.Parallel()
	valkeytest.OnTargets(t, func(t *testing.T, tg valkeytest.Target) {
		ctx, c, b, name, q := setup(t, tg, bus.Config{})
		// 20 batches of 50; the later batches run earlier, so mint order is not run-at order.
		for i := range 20 {
			_, err := b.EnqueueBatch(ctx, name, payloads(50, "s"), &bus.EnqueueOpts{Delay: time.Hour - time.Duration(i)*time.Minute})
			require.NoError(t, err)
		}
		want := zsetEntries(t, c, q.Schedule())
		require.Len(t, want, 1000)
		require.True(t, slices.IsSortedFunc(want, byScore))
		require.NotEqual(t, want[0].At, want[999].At)

		got, pages := browseAll(t, b, name, keys.Schedule, false, 7)
		require.Equal(t, 143, pages, "1,000 jobs in pages of 7")
		for i := range got {
			require.Zero(t, got[i].Token, "never claimed")
			got[i].Token = 0
		}
		require.Equal(t, want, got, "oldest-first: by run-at, ties by id")

		got, _ = browseAll(t, b, name, keys.Schedule, true, 7)
		slices.Reverse(want)
		require.Equal(t, want, got, "newest-first: the reverse")
	})
}

// TestBrowseActive: 1,000 claimed jobs with lease deadlines in ten claims (each claim's jobs
// share a deadline), a tenth of them claimed a second time (token 2): paged through in pages
// of 9, each job comes once, by deadline then id, with its deadline and its holder's token.
// While paging, jobs already listed and the cursor's own job are completed: the later pages
// still list every job that stayed, once.
func TestBrowseActive(t *testing.T) {
	t.Parallel()
	valkeytest.OnTargets(t, func(t *testing.T, tg valkeytest.Target) {
		ctx, c, b, name, q := setup(t, tg, bus.Config{})
		_, err := b.EnqueueBatch(ctx, name, payloads(1000, "a"), nil)
		require.NoError(t, err)
		held := map[keys.JobID]bus.Job{}
		var back []bus.Job
		for i := range 10 {
			// Leases shrink claim by claim, so claim order is not deadline order.
			jobs, err := b.Claim(ctx, name, &bus.ClaimOpts{Count: 100, Lease: time.Hour - time.Duration(i)*time.Minute})
			require.NoError(t, err)
			require.Len(t, jobs, 100)
			back = append(back, jobs[:10]...)
			for _, j := range jobs[10:] {
				held[j.ID] = j
			}
		}
		for _, j := range back { // back to pending, claimed again below with token 2
			_, err := b.Fail(ctx, j, nil)
			require.NoError(t, err)
		}
		again, err := b.Claim(ctx, name, &bus.ClaimOpts{Count: 100, Lease: 2 * time.Hour})
		require.NoError(t, err)
		require.Len(t, again, 100)
		for _, j := range again {
			require.Equal(t, int64(2), j.Token)
			held[j.ID] = j
		}
		want := zsetEntries(t, c, q.Active())
		require.Len(t, want, 1000)
		for i := range want {
			want[i].Token = held[want[i].ID].Token
		}

		got, pages := browseAll(t, b, name, keys.Active, false, 9)
		require.Equal(t, 112, pages)
		require.Equal(t, want, got, "by deadline, ties by id, with the holder's token")
		got, _ = browseAll(t, b, name, keys.Active, true, 9)
		slices.Reverse(got)
		require.Equal(t, want, got, "newest-first is the reverse")

		// Paging while jobs leave: after each page, complete its jobs (the cursor's included)
		// and one job further on; every job still active when its turn comes is listed once.
		gone := map[keys.JobID]bool{}
		var listed []bus.Entry
		o := &bus.BrowseOpts{Set: keys.Active, Limit: 50}
		for n := 0; ; n++ {
			p, err := b.Browse(ctx, name, o)
			require.NoError(t, err)
			listed = append(listed, p.Entries...)
			for _, e := range p.Entries {
				require.False(t, gone[e.ID], "a completed job listed")
				require.NoError(t, b.Complete(ctx, held[e.ID], nil))
				gone[e.ID] = true
			}
			if ahead := want[min(len(want)-1, (n+1)*50+25)]; !gone[ahead.ID] {
				require.NoError(t, b.Complete(ctx, held[ahead.ID], nil))
				gone[ahead.ID] = true
			}
			if p.Next.IsZero() {
				break
			}
			o.After, o.AfterAt = p.Next, p.NextAt
		}
		var stayed []bus.Entry
		listedIDs := map[keys.JobID]int{}
		for _, e := range listed {
			listedIDs[e.ID]++
		}
		for _, e := range want {
			if listedIDs[e.ID] == 1 {
				stayed = append(stayed, e)
			}
			require.LessOrEqual(t, listedIDs[e.ID], 1, "listed twice: %s", e.ID)
		}
		require.Equal(t, stayed, listed, "in order")
		require.Equal(t, 1000-len(listed), len(gone)-len(listed), "every job not listed was completed ahead of its page")
		counts, err := b.Counts(ctx, name)
		require.NoError(t, err)
		require.Zero(t, counts.Active)
	})
}

// TestBrowseRefuses: the options that do not apply to a set, and pages over a set's
// maximum, are refused before any round trip.
func TestBrowseRefuses(t *testing.T) {
	t.Parallel()
	ctx, _, b, name, _ := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	id := keys.NewJobID()
	for what, o := range map[string]*bus.BrowseOpts{
		"a mint-time range on active":    {Set: keys.Active, From: time.Now()},
		"a mint-time range on schedule":  {Set: keys.Schedule, To: time.Now()},
		"a page over the maximum":        {Set: keys.Active, Limit: bus.MaxBrowseLimit + 1},
		"a page of ids over the maximum": {Set: keys.Dead, Limit: bus.MaxBatch + 1},
		"a lane's page over the maximum": {Lane: "a", Limit: bus.MaxBatch + 1},
		// ZRANGEBYLEX's count is Limit + 1, which wraps to a negative count ("every id") at
		// the largest int.
		"the largest Limit":              {Limit: math.MaxInt},
		"After without AfterAt":          {Set: keys.Schedule, After: id},
		"AfterAt without After":          {Set: keys.Active, AfterAt: time.Now()},
		"AfterAt before 1970":            {Set: keys.Active, After: id, AfterAt: time.UnixMilli(-1)},
		"AfterAt on pending":             {After: id, AfterAt: time.Now()},
		"a negative Limit":               {Set: keys.Schedule, Limit: -1},
		"a set that holds no jobs: meta": {Set: keys.Meta},
	} {
		_, err := b.Browse(ctx, name, o)
		require.ErrorIs(t, err, bus.ErrInvalid, what)
	}
	p, err := b.Browse(ctx, name, &bus.BrowseOpts{Set: keys.Active, Limit: bus.MaxBrowseLimit})
	require.NoError(t, err)
	require.Empty(t, p.IDs, "an empty set: an empty page")
	require.True(t, p.Next.IsZero())
	for _, set := range []keys.Type{keys.Pending, keys.Dead} {
		p, err = b.Browse(ctx, name, &bus.BrowseOpts{Set: set, Limit: bus.MaxBatch})
		require.NoError(t, err, set)
		require.Empty(t, p.IDs)
	}
}
