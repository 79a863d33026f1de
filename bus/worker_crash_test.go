package bus_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// crashSettings are the sizes of TestWorkerKill: 20,000 jobs and 10 kills in `make test`;
// with EMQ_SOAK=1 (make soak), 100,000 jobs and 20 kills.
func crashSettings() (jobs, kills int) {
	if os.Getenv("EMQ_SOAK") == "1" {
		return 100_000, 20
	}
	return 20_000, 10
}

// TestWorkerKill: 3 worker processes drain a queue while a random one is SIGKILLed (and
// started again at once) 10 times; then the queue drains: 0 jobs lost (every row retired),
// 0 completed twice (no id has two accepted completes), 0 left in active.
//
// "Completed" is what the server accepted: the complete script retires the row, so a row
// that is gone was completed (nothing else here deletes rows), and a second complete of the
// same row can only answer EMQSTALE. Each worker process counts, per id, the completes whose
// reply came back nil, after the reply: a count of 2 would be two holders both told "done",
// the failure fencing prevents. A SIGKILL between a complete's acceptance and its record
// leaves an id completed but unrecorded; those are counted apart and bounded by the kills
// times the concurrency (the most completes one process can have in flight).
func TestWorkerKill(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Shared(t)
	c := srv.Client(t)
	b := newBus(t, c, bus.Config{})
	ctx := context.Background()
	name := valkeytest.TestName(t)
	q := keys.MustQueue(name)
	n, kills := crashSettings()
	const (
		workers     = 3
		concurrency = 8
		lease       = time.Second
		work        = time.Millisecond
	)
	var ids []keys.JobID
	for len(ids) < n {
		ids = append(ids, enqueueTasks(t, b, name, "work", min(1000, n-len(ids)), "")...)
	}
	start := time.Now()
	procs := make([]*proc, workers)
	gen := 0
	spawn := func(i int) {
		gen++
		procs[i] = startProc(t, srv.Addr, name, fmt.Sprintf("w%d.%d", i, gen), lease, work, concurrency, false)
	}
	for i := range procs {
		spawn(i)
	}
	remaining := func() int64 {
		cs, err := b.Counts(ctx, name)
		require.NoError(t, err)
		return cs.Pending + cs.Active + cs.Scheduled
	}
	// Kill at evenly spaced points of progress, so that every kill lands while jobs run.
	for k := 1; k <= kills; k++ {
		threshold := int64(n) - int64(n)*int64(k)/int64(kills+2)
		valkeytest.Eventually(t, 5*time.Minute, fmt.Sprintf("%d jobs left before kill %d", threshold, k), func() bool { return remaining() <= threshold })
		i := rand.N(workers)
		procs[i].kill(t)
		spawn(i)
	}
	valkeytest.Eventually(t, 5*time.Minute, "the queue to drain", func() bool { return remaining() == 0 })
	elapsed := time.Since(start)
	for _, p := range procs {
		p.stop(t)
	}

	counts, err := b.Counts(ctx, name)
	require.NoError(t, err)
	require.Equal(t, bus.Counts{}, counts, "nothing pending, active, scheduled or dead")
	// 0 lost: every row was retired, which only an accepted complete does here.
	rowsLeft := int64(0)
	for i := 0; i < n; i += 1000 {
		rk := make([]string, 0, 1000)
		for _, id := range ids[i:min(i+1000, n)] {
			k, err := q.Job(id)
			require.NoError(t, err)
			rk = append(rk, k)
		}
		e, err := c.Do(ctx, c.B().Exists().Key(rk...).Build()).AsInt64()
		require.NoError(t, err)
		rowsLeft += e
	}
	require.Zero(t, rowsLeft, "jobs lost: rows not retired")
	// 0 completed twice.
	done, err := c.Do(ctx, c.B().Hgetall().Key(name+".done").Build()).AsIntMap()
	require.NoError(t, err)
	twice, recorded := 0, 0
	for _, id := range ids {
		switch v := done[id.String()]; {
		case v > 1:
			twice++
		case v == 1:
			recorded++
		}
	}
	require.Zero(t, twice, "jobs completed twice")
	require.Len(t, done, recorded, "records only of enqueued ids")
	unrecorded := n - recorded
	t.Logf("%d jobs, %d SIGKILLs, %d worker processes: drained in %v; 0 lost, 0 completed twice, 0 active; %d completes accepted but unrecorded because their process was killed before recording them",
		n, kills, workers, elapsed.Round(time.Millisecond), unrecorded)
	require.LessOrEqual(t, unrecorded, kills*concurrency)
	require.NoError(t, c.Do(ctx, c.B().Del().Key(name+".done").Build()).Error())
}

// TestWorkerZombie: a worker process is SIGSTOPped while it holds 4 jobs, for twice its
// lease; another worker reaps the jobs and completes them under token 2. When the zombie is
// continued, every complete, fail or extend it sends for those jobs answers EMQSTALE (0 are
// accepted), and each job finished exactly once, under its new token. Two cases: in
// "heartbeat" the zombie's overdue heartbeat speaks first (its extends are refused and its
// handlers' outcomes are then dropped); in "complete" the zombie renews nothing (no heartbeat,
// no housekeeping), so its handlers' completes are what it sends, and they are refused. The
// zombie's handlers work 3 s, wall-clock, from about when it is stopped; in "heartbeat" they
// work 10 s, so that they are still working when it is continued: the pause lasts until the
// other worker, a process started during it, has completed the jobs, which a loaded machine
// took past 3 s, and then the handlers' completes went first.
func TestWorkerZombie(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		work time.Duration
		env  []string
		want string // the answers the zombie must get after it is continued
	}{
		{"heartbeat", 10 * time.Second, nil, "lease lost "},
		{"complete", 3 * time.Second, []string{envBeat + "=1h", envHousekeep + "=-1ns"}, "stale "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			zombieCase(t, tc.work, tc.env, tc.want)
		})
	}
}

func zombieCase(t *testing.T, work time.Duration, env []string, want string) {
	srv := valkeytest.Shared(t)
	c := srv.Client(t)
	b := newBus(t, c, bus.Config{})
	ctx := context.Background()
	name := valkeytest.TestName(t)
	const lease = time.Second
	ids := enqueueTasks(t, b, name, "work", 4, "")
	zombie := startProc(t, srv.Addr, name, "zombie", lease, work, 4, true, append(env, envStarted+"=1")...)
	// The zombie holds the 4 jobs once their handlers started: the server's count of active
	// jobs is not enough, since a claim's reply may still be on its way to the zombie when it
	// is stopped, and a round trip in flight then runs out of its time (half the lease) during
	// the pause: the zombie never learns of those jobs, so it would hear nothing about them.
	valkeytest.Eventually(t, time.Minute, "the zombie to run the 4 jobs", func() bool {
		n, err := c.Do(ctx, c.B().Hlen().Key(name+".started").Build()).AsInt64()
		require.NoError(t, err)
		return n == 4
	})
	logOf := func(who string) []string {
		l, err := c.Do(ctx, c.B().Lrange().Key(name+".log."+who).Start(0).Stop(-1).Build()).AsStrSlice()
		require.NoError(t, err)
		return l
	}
	require.NoError(t, zombie.cmd.Process.Signal(syscall.SIGSTOP))
	stopped := time.Now()
	time.Sleep(2 * lease) // the fault under test is a pause of twice the lease
	// The answers the zombie got after it was stopped: an answer it got before (an extend
	// accepted just before the SIGSTOP) may be recorded only after the SIGCONT, so each
	// entry carries when its answer came (the last field).
	since := func(l []string) []string {
		var out []string
		for _, e := range l {
			f := strings.Fields(e)
			if at, err := strconv.ParseInt(f[len(f)-1], 10, 64); err == nil && at >= stopped.UnixMicro() {
				out = append(out, strings.Join(f[:len(f)-1], " "))
			}
		}
		return out
	}

	// The other worker reaps the expired leases and completes the jobs under token 2.
	other := startProc(t, srv.Addr, name, "other", lease, 0, 4, true)
	valkeytest.Eventually(t, time.Minute, "the other worker to complete the 4 jobs", func() bool {
		return len(logOf("other")) >= 4 && func() bool {
			cs, err := b.Counts(ctx, name)
			require.NoError(t, err)
			return cs == bus.Counts{}
		}()
	})
	require.GreaterOrEqual(t, time.Since(stopped), 2*lease)
	require.NoError(t, zombie.cmd.Process.Signal(syscall.SIGCONT))

	// Every job gets at least one answer for the zombie.
	var after []string
	valkeytest.Eventually(t, time.Minute, "the zombie to hear about each job", func() bool {
		after = since(logOf("zombie"))
		heard := map[string]bool{}
		for _, e := range after {
			f := strings.Fields(e)
			heard[f[len(f)-2]] = true
		}
		return len(heard) == 4
	})
	zombie.stop(t)
	other.stop(t)
	after = since(logOf("zombie"))
	for _, e := range after {
		require.True(t, strings.HasPrefix(e, "stale ") || strings.HasPrefix(e, "lease lost "), "the zombie's verb was accepted: %s", e)
	}
	require.True(t, slices.ContainsFunc(after, func(e string) bool { return strings.HasPrefix(e, want) }), "expected %q answers: %v", want, after)
	t.Logf("the zombie's answers after it was continued: %v", after)
	wantDone := map[string]bool{}
	for _, id := range ids {
		wantDone["completed "+id.String()+" 2"] = true
	}
	got := map[string]bool{}
	for _, e := range procLog(t, c, name, "other") {
		if strings.HasPrefix(e, "completed ") {
			require.False(t, got[e], "completed twice: %s", e)
			got[e] = true
		}
	}
	require.Equal(t, wantDone, got, "each job completed once, by the other worker, under token 2")
	done, err := c.Do(ctx, c.B().Hgetall().Key(name+".done").Build()).AsIntMap()
	require.NoError(t, err)
	require.Len(t, done, 4)
	for _, id := range ids {
		require.Equal(t, int64(1), done[id.String()])
	}
	require.NoError(t, c.Do(ctx, c.B().Del().Key(name+".done", name+".started", name+".log.zombie", name+".log.other").Build()).Error())
}
