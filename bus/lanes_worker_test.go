package bus_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// enqueueLaneTasks enqueues n tasks of kind into lane, in batches of 1000.
func enqueueLaneTasks(t *testing.T, b *bus.Bus, queue, lane, kind string, n int) {
	t.Helper()
	for done := 0; done < n; {
		batch := make([]bus.NewJob, min(1000, n-done))
		for i := range batch {
			p, err := bus.EncodeTask(kind, args{N: done + i}, nil)
			require.NoError(t, err)
			batch[i].Payload = p
		}
		_, err := b.EnqueueBatch(context.Background(), queue, batch, &bus.EnqueueOpts{Lane: lane})
		require.NoError(t, err)
		done += len(batch)
	}
}

// fairnessSizes are the sizes of TestLaneFairness: lane A's backlog, the jobs of B, and what
// A may complete meanwhile. 50,000 with EMQ_SOAK=1 (make soak), 5,000 in make test.
func fairnessSizes() (a, b, most int) {
	if os.Getenv("EMQ_SOAK") == "1" {
		return 50_000, 100, 1000
	}
	return 5_000, 100, 1000
}

// TestLaneFairness: lane A holds a backlog of 50,000 jobs (5,000 in make test), a worker drains
// it; 100 jobs are then enqueued in lane B: all of B's jobs complete before A completes 1,000
// more, because the claims serve the two lanes in turn.
func TestLaneFairness(t *testing.T) {
	t.Parallel()
	ctx, _, b, name, _ := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	nA, nB, most := fairnessSizes()
	enqueueLaneTasks(t, b, name, "A", "work", nA)
	var aDone, bDone atomic.Int64
	var aAtLastB atomic.Int64
	startWorker(t, b, bus.WorkerConfig{Queue: name, Concurrency: 20, OnEvent: func(e bus.JobEvent) {
		if e.Type != bus.JobCompleted {
			return
		}
		if e.Job.Lane == "A" {
			aDone.Add(1)
		} else if bDone.Add(1) == int64(nB) {
			aAtLastB.Store(aDone.Load())
		}
	}}, func(w *bus.Worker) {
		bus.MustHandle(w, "work", func(context.Context, *bus.Task[args]) error { return nil }, nil)
	})
	valkeytest.Eventually(t, time.Minute, "the worker to be draining A", func() bool { return aDone.Load() >= 500 })
	aAtB := aDone.Load()
	enqueueLaneTasks(t, b, name, "B", "work", nB)
	valkeytest.Eventually(t, time.Minute, "B's jobs to complete", func() bool { return bDone.Load() == int64(nB) })
	during := aAtLastB.Load() - aAtB
	left, err := b.Counts(ctx, name)
	require.NoError(t, err)
	t.Logf("lane A: %d queued; %d enqueued in lane B after A completed %d: A completed %d more until B's last completed (%d of A still waiting)", nA, nB, aAtB, during, left.InLanes)
	require.Less(t, during, int64(most), "B waited behind A's backlog")
	require.Positive(t, left.InLanes, "A was still backlogged when B finished")
}

// zipfSizes are the sizes of 100 lanes, skewed: lane i (1-based) gets about total / i^s / H.
func zipfSizes(lanes, total int, s float64) []int {
	var h float64
	for i := 1; i <= lanes; i++ {
		h += 1 / math.Pow(float64(i), s)
	}
	out := make([]int, lanes)
	for i := range out {
		out[i] = max(1, int(float64(total)/math.Pow(float64(i+1), s)/h))
	}
	return out
}

// TestLaneZipf: 100 lanes of Zipf-skewed sizes, enqueued in random order, drained by one
// worker. Round robin in turns of at most 32 jobs serves a lane of k jobs before any other lane
// has given more than k + 32: the claim that takes a lane's last job is at most
// sum(min(size, k + 32)) over the lanes, plus the worker's concurrency. Each lane's p99 wait
// (from the start of the drain, every job being enqueued before it, to the job's claim) is
// reported.
func TestLaneZipf(t *testing.T) {
	t.Parallel()
	ctx, _, b, name, _ := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	const lanes, total, concurrency = 100, 10_000, 20
	sizes := zipfSizes(lanes, total, 1.1)
	// Enqueue in batches of 50 jobs from lanes drawn at random, so lanes interleave in mint order.
	left := slices.Clone(sizes)
	r := rand.New(rand.NewPCG(7, 7))
	n := 0
	for {
		var open []int
		for i, l := range left {
			if l > 0 {
				open = append(open, i)
			}
		}
		if len(open) == 0 {
			break
		}
		i := open[r.IntN(len(open))]
		k := min(50, left[i])
		enqueueLaneTasks(t, b, name, "z"+strconv.Itoa(i), "work", k)
		left[i] -= k
		n += k
	}
	var mu sync.Mutex
	var order []string              // lanes in claim order
	waits := map[string][]float64{} // ms from the start of the drain to the claim, by lane
	start := time.Now()             // every job was enqueued before
	done := make(chan struct{})
	var completed atomic.Int64
	startWorker(t, b, bus.WorkerConfig{Queue: name, Concurrency: concurrency, OnEvent: func(e bus.JobEvent) {
		switch e.Type {
		case bus.JobClaimed:
			mu.Lock()
			order = append(order, e.Job.Lane)
			waits[e.Job.Lane] = append(waits[e.Job.Lane], float64(time.Since(start).Microseconds())/1000)
			mu.Unlock()
		case bus.JobCompleted:
			if completed.Add(1) == int64(n) {
				close(done)
			}
		}
	}}, func(w *bus.Worker) {
		bus.MustHandle(w, "work", func(context.Context, *bus.Task[args]) error { return nil }, nil)
	})
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("drained %d of %d", completed.Load(), n)
	}
	mu.Lock()
	defer mu.Unlock()
	last := map[string]int{}
	for i, l := range order {
		last[l] = i + 1
	}
	var report strings.Builder
	for i, size := range sizes {
		lane := "z" + strconv.Itoa(i)
		bound := concurrency
		for _, other := range sizes {
			bound += min(other, size+laneTurn)
		}
		require.LessOrEqual(t, last[lane], bound, "lane %s of %d jobs: its last job was claim %d, round robin bounds it at %d", lane, size, last[lane], bound)
		w := waits[lane]
		sort.Float64s(w)
		p99 := w[min(len(w)-1, int(math.Ceil(0.99*float64(len(w))))-1)]
		if i < 5 || i%10 == 9 {
			fmt.Fprintf(&report, "  lane %-4s %5d jobs: last claimed at claim %5d of %d (bound %5d), p99 wait %7.1f ms\n", lane, size, last[lane], n, bound, p99)
		}
	}
	counts, err := b.Counts(ctx, name)
	require.NoError(t, err)
	require.Equal(t, bus.Counts{}, counts)
	t.Logf("100 Zipf(1.1) lanes, %d jobs, one worker of concurrency %d:\n%s", n, concurrency, report.String())
}

// TestLaneWorkerCapWakes: a lane of cap 1 whose jobs take 30 ms: the worker runs them one after
// the other, each started within a few ms of the previous one's completion (the freed slot
// pushes a wake marker; the worker does not wait for its WakeTimeout), never two at once.
func TestLaneWorkerCapWakes(t *testing.T) {
	t.Parallel()
	ctx, _, b, name, _ := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	require.NoError(t, b.SetLaneLimits(ctx, name, "one", bus.LaneLimits{Cap: 1}))
	const jobs = 8
	enqueueLaneTasks(t, b, name, "one", "work", jobs)
	var running, most atomic.Int64
	var mu sync.Mutex
	var starts, ends []time.Time
	startWorker(t, b, bus.WorkerConfig{Queue: name, Concurrency: 5, WakeTimeout: 30 * time.Second}, func(w *bus.Worker) {
		bus.MustHandle(w, "work", func(context.Context, *bus.Task[args]) error {
			n := running.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			mu.Lock()
			starts = append(starts, time.Now())
			mu.Unlock()
			time.Sleep(30 * time.Millisecond)
			running.Add(-1)
			mu.Lock()
			ends = append(ends, time.Now())
			mu.Unlock()
			return nil
		}, nil)
	})
	drained(t, b, name, time.Minute)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, int64(1), most.Load(), "never two of the lane at once")
	require.Len(t, starts, jobs)
	var worst time.Duration
	for i := 1; i < jobs; i++ {
		worst = max(worst, starts[i].Sub(ends[i-1]))
	}
	t.Logf("cap 1, %d jobs of 30 ms: the longest gap between a completion and the next start was %v", jobs, worst)
	require.Less(t, worst, time.Second, "the next job waited for something other than the freed slot's wake marker")
}

// TestLaneWorkerRateSleeps: a lane limited to 10 claims a second, backlogged: the worker's
// claims come at the rate's moments, and it does not poll meanwhile: over 2 s its server sees
// a few script calls per claimed job, not a poll every few ms. A timing test (make test runs
// it alone, without the race detector): a claim sent late by the worker's wake-up moves the
// rate's next moment by as much (the lane's burst is 1), so the gaps measure the process's
// wake-up latency too, which a loaded machine under -race took to 18 ms.
func TestLaneWorkerRateSleeps(t *testing.T) {
	valkeytest.Timing(t)
	srv := valkeytest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	b := newBus(t, c, bus.Config{})
	name := valkeytest.TestName(t)
	require.NoError(t, b.SetLaneLimits(ctx, name, "slow", bus.LaneLimits{Rate: bus.Rate{Limit: 10}}))
	enqueueLaneTasks(t, b, name, "slow", "work", 100)
	var mu sync.Mutex
	var claims []time.Time
	startWorker(t, b, bus.WorkerConfig{Queue: name, Concurrency: 10, HousekeepInterval: -1, OnEvent: func(e bus.JobEvent) {
		if e.Type == bus.JobClaimed {
			mu.Lock()
			claims = append(claims, time.Now())
			mu.Unlock()
		}
	}}, func(w *bus.Worker) {
		bus.MustHandle(w, "work", func(context.Context, *bus.Task[args]) error { return nil }, nil)
	})
	valkeytest.Eventually(t, 10*time.Second, "the first claims", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(claims) >= 2
	})
	before := evalCalls(t, c)
	time.Sleep(2 * time.Second)
	calls := evalCalls(t, c) - before
	mu.Lock()
	n := len(claims)
	gaps := make([]time.Duration, 0, n)
	for i := 1; i < n; i++ {
		gaps = append(gaps, claims[i].Sub(claims[i-1]))
	}
	mu.Unlock()
	sort.Slice(gaps, func(i, j int) bool { return gaps[i] < gaps[j] })
	t.Logf("10 a second: %d claims so far, the median gap %v; %d script calls in 2 s", n, gaps[len(gaps)/2], calls)
	require.InDelta(t, float64(100*time.Millisecond), float64(gaps[len(gaps)/2]), float64(15*time.Millisecond), "claims spaced by the rate")
	require.LessOrEqual(t, calls, int64(100), "about 20 claims and 20 completes in 2 s, and no polling")
}

// evalCalls is how many EVALSHA and EVAL calls the server has run (INFO commandstats).
func evalCalls(t *testing.T, c valkey.Client) int64 {
	t.Helper()
	info, err := c.Do(context.Background(), c.B().Info().Section("commandstats").Build()).ToString()
	require.NoError(t, err)
	var n int64
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (name != "cmdstat_evalsha" && name != "cmdstat_eval") {
			continue
		}
		for _, f := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				k, err := strconv.ParseInt(v, 10, 64)
				require.NoError(t, err)
				n += k
			}
		}
	}
	return n
}

// TestLaneWorkerRateLimited: a handler answers its job's first attempt with RateLimited(1s), as
// for a partner's 429: no job of the lane is claimed for a second (claim times read on the
// server), the job's attempts are unchanged by the hand-back, and the job runs again after it
// with its claim refunded; the other lane runs on meanwhile.
func TestLaneWorkerRateLimited(t *testing.T) {
	t.Parallel()
	ctx, c, b, name, _ := setup(t, valkeytest.Target{Client: valkeytest.Shared(t).Client(t)}, bus.Config{})
	const lease = time.Minute
	enqueueLaneTasks(t, b, name, "partner", "work", 10)
	enqueueLaneTasks(t, b, name, "other", "work", 10)
	var mu sync.Mutex
	claims := map[string][]int64{} // server ms of each claim, by lane
	var limitedAt, until int64
	var limitedID string
	var first atomic.Bool
	w := startWorker(t, b, bus.WorkerConfig{Queue: name, Concurrency: 1, Lease: lease, StatsInterval: 20 * time.Millisecond, OnEvent: func(e bus.JobEvent) {
		if e.Type == bus.JobRateLimited {
			mu.Lock()
			until = e.At.UnixMilli()
			mu.Unlock()
		}
	}}, func(w *bus.Worker) {
		bus.MustHandle(w, "work", func(ctx context.Context, task *bus.Task[args]) error {
			info, err := b.Lookup(ctx, name, task.Job.ID)
			require.NoError(t, err)
			at := info.At.UnixMilli() - lease.Milliseconds()
			mu.Lock()
			claims[task.Job.Lane] = append(claims[task.Job.Lane], at)
			mu.Unlock()
			if task.Job.Lane == "partner" && task.Args.N == 2 && first.CompareAndSwap(false, true) {
				mu.Lock()
				limitedAt, limitedID = serverMillis(t, c), task.Job.ID.String()
				mu.Unlock()
				return bus.RateLimited(time.Second)
			}
			time.Sleep(5 * time.Millisecond)
			return nil
		}, nil)
	})
	valkeytest.Eventually(t, 10*time.Second, "the rate-limited job's hand-back", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return until != 0
	})
	id, err := keys.ParseJobID(limitedID)
	require.NoError(t, err)
	info, err := b.Lookup(ctx, name, id)
	require.NoError(t, err)
	require.Equal(t, int64(1), info.Attempts, "attempts unchanged by the hand-back")
	require.Equal(t, int64(1), info.Refunds)
	require.Equal(t, bus.StatePending, info.State)
	drained(t, b, name, 30*time.Second)
	mu.Lock()
	defer mu.Unlock()
	// The lane closes when the ratelimited script runs (its server TIME: until less the
	// second), a round trip after the handler returned: a claim already in flight then (the
	// pipelined loop keeps two) may still take a job of the lane before it closes.
	closedAt := until - time.Second.Milliseconds()
	require.GreaterOrEqual(t, closedAt, limitedAt)
	var during []int64
	for _, at := range claims["partner"] {
		if at > closedAt && at < until {
			during = append(during, at-closedAt)
		}
	}
	require.Empty(t, during, "claims of the closed lane within its second (ms after it closed)")
	var before, after int
	for _, at := range claims["partner"] {
		switch {
		case at <= closedAt:
			before++
		case at >= until:
			after++
		}
	}
	otherDuring := 0
	for _, at := range claims["other"] {
		if at > closedAt && at < until {
			otherDuring++
		}
	}
	// A turn gives a claim several jobs of the lane, so the claim that took the limited job
	// may have taken the next one with it (the buffer of concurrency 1 holds one), and a claim
	// in flight may take one more before the lane closes: claimed before it closed, they ran.
	// Every other claim of the lane, the handed-back job's second included, came after the
	// second.
	require.Equal(t, 11, before+after, "the lane's 10 jobs, and the handed-back one again")
	require.GreaterOrEqual(t, after, 6, "the handed-back job and the lane's jobs not yet claimed, after the second")
	require.Equal(t, int64(1), w.Stats().RateLimited)
	valkeytest.Eventually(t, 10*time.Second, "the published stats to count the hand-back", func() bool {
		fs, err := b.WorkerStats(ctx, name)
		require.NoError(t, err)
		return fs.Total.RateLimited == 1 && fs.Total.Completed == 20
	})
	require.Positive(t, otherDuring, "the other lane ran meanwhile")
	t.Logf("429 at server ms %d, lane closed at %d and held until %d: 0 claims of the lane meanwhile, %d of the other lane; %d of the lane after", limitedAt, closedAt, until, otherDuring, after)
}
