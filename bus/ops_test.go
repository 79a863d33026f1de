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
