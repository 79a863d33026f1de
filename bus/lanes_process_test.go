package bus_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// The lane tests across worker processes: each process is this test binary running only
// TestLaneWorkerProcess, configured by environment, and records into test keys of its queue's
// name (outside the grammar):
//
//	<queue>.checks      INCR per job of the checked lane whose handler ran the cap check
//	<queue>.violations  list of "own indep" for each check that saw more than the cap
//	<queue>.claims      list of server ms of each claim of the checked lane (mode rate)

const (
	envLaneAddr  = "EMQ_LANE_ADDR"
	envLaneQueue = "EMQ_LANE_QUEUE"
	envLaneName  = "EMQ_LANE_NAME"
	envLaneMode  = "EMQ_LANE_MODE" // cap or rate
	envLaneLane  = "EMQ_LANE_LANE" // the lane checked
	envLaneCap   = "EMQ_LANE_CAP"
	envLaneConc  = "EMQ_LANE_CONCURRENCY"
	envLaneLease = "EMQ_LANE_LEASE"
	envLaneWork  = "EMQ_LANE_WORK"
)

// capCheck reads, in one atomic step on the server, the lane's count of claimed jobs that the
// scripts keep (laneactive) and an independent count: the ids of active whose joblane entry
// names the lane. A test's own script, not the protocol's.
var capCheck = valkey.NewLuaScript(`
local own = tonumber(redis.call('HGET', KEYS[1], ARGV[1])) or 0
local ids = redis.call('ZRANGE', KEYS[2], 0, -1)
local indep = 0
for i = 1, #ids, 1000 do
  local part = {unpack(ids, i, math.min(i + 999, #ids))}
  local vals = redis.call('HMGET', KEYS[3], unpack(part))
  for j = 1, #part do
    if vals[j] and string.match(vals[j], '^[0-3]:[0-9]+:(.*)$') == ARGV[1] then indep = indep + 1 end
  end
end
return {own, indep}
`)

// claimTime records a claim's server time in one round trip: the job's lease deadline (its
// score in active) less the lease, pushed on the test's list.
var claimTime = valkey.NewLuaScript(`
local d = redis.call('ZSCORE', KEYS[1], ARGV[1])
if d then redis.call('RPUSH', KEYS[2], tonumber(d) - tonumber(ARGV[2])) end
return d
`)

// TestLaneWorkerProcess is the body of a lane worker process; run directly, it skips.
func TestLaneWorkerProcess(t *testing.T) {
	addr := os.Getenv(envLaneAddr)
	if addr == "" {
		t.Skip("a worker process of the lane tests (TestLaneCapProcesses, TestLaneRateProcesses); not a test by itself")
	}
	queue, name, mode, lane := os.Getenv(envLaneQueue), os.Getenv(envLaneName), os.Getenv(envLaneMode), os.Getenv(envLaneLane)
	limit, _ := strconv.ParseInt(os.Getenv(envLaneCap), 10, 64)
	conc, err := strconv.Atoi(os.Getenv(envLaneConc))
	require.NoError(t, err)
	lease, err := time.ParseDuration(os.Getenv(envLaneLease))
	require.NoError(t, err)
	work, err := time.ParseDuration(os.Getenv(envLaneWork))
	require.NoError(t, err)
	c, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	require.NoError(t, err)
	defer c.Close()
	b, err := bus.New(c, bus.Config{})
	require.NoError(t, err)
	q := keys.MustQueue(queue)
	ctx := context.Background()
	w, err := bus.NewWorker(b, bus.WorkerConfig{Queue: queue, Concurrency: conc, Lease: lease, HousekeepInterval: lease / 5,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	require.NoError(t, err)
	bus.MustHandle(w, "work", func(ctx context.Context, task *bus.Task[args]) error {
		if task.Job.Lane == lane {
			switch mode {
			case "cap":
				got, err := capCheck.Exec(ctx, c, []string{q.LaneActive(), q.Active(), q.JobLane()}, []string{lane}).AsIntSlice()
				if err != nil || len(got) != 2 {
					fmt.Fprintf(os.Stderr, "worker %s: cap check: %v %v\n", name, got, err)
				} else if got[0] > limit || got[1] > limit {
					_ = c.Do(ctx, c.B().Rpush().Key(queue+".violations").Element(fmt.Sprintf("%d %d", got[0], got[1])).Build()).Error()
				}
				_ = c.Do(ctx, c.B().Incr().Key(queue+".checks").Build()).Error()
			case "rate":
				// The claim's server time: the lease deadline less the lease (no heartbeat has
				// renewed it yet: the lease is long and the handler runs at once).
				err := claimTime.Exec(ctx, c, []string{q.Active(), queue + ".claims"}, []string{task.Job.ID.String(), strconv.FormatInt(lease.Milliseconds(), 10)}).Error()
				if err != nil {
					fmt.Fprintf(os.Stderr, "worker %s: recording the claim: %v\n", name, err)
				}
			}
		}
		time.Sleep(work)
		return nil
	}, nil)
	require.NoError(t, w.Start())
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, w.Close(cctx))
}

// startLaneProc starts a lane worker process.
func startLaneProc(t *testing.T, addr, queue, name, mode, lane string, limit int, conc int, lease, work time.Duration) *proc {
	t.Helper()
	out := filepath.Join(t.TempDir(), name+".out")
	f, err := os.Create(out)
	require.NoError(t, err)
	defer f.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLaneWorkerProcess$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), envLaneAddr+"="+addr, envLaneQueue+"="+queue, envLaneName+"="+name, envLaneMode+"="+mode,
		envLaneLane+"="+lane, envLaneCap+"="+strconv.Itoa(limit), envLaneConc+"="+strconv.Itoa(conc),
		envLaneLease+"="+lease.String(), envLaneWork+"="+work.String())
	cmd.Stdout, cmd.Stderr = f, f
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &proc{name: name, cmd: cmd, stdin: stdin, out: out}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
		if t.Failed() {
			data, _ := os.ReadFile(out)
			lines := strings.Split(strings.TrimSpace(string(data)), "\n")
			t.Logf("lane worker process %s, last lines:\n%s", name, strings.Join(lines[max(0, len(lines)-20):], "\n"))
		}
	})
	return p
}

// laneCapSettings are the sizes of TestLaneCapProcesses: jobs of the capped lane, jobs of an
// uncapped one, SIGKILLs. More with EMQ_SOAK=1.
func laneCapSettings() (capped, other, kills int) {
	if os.Getenv("EMQ_SOAK") == "1" {
		return 1500, 15_000, 8
	}
	return 300, 3000, 3
}

// TestLaneCapProcesses: lane L has a cap of 3; 3 worker processes at concurrency 20 drain it
// beside an uncapped lane M while a random process is SIGKILLed (and started again) a few
// times. Each of L's jobs, as its handler starts, checks on the server in one atomic step both
// the scripts' count of L's claimed jobs and an independent count (the ids in active whose
// joblane entry names L): neither ever exceeds 3. A killed process's jobs hold their slots
// until reap frees them with their expired leases; after the drain every count is zero and no
// lane state is left.
func TestLaneCapProcesses(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Shared(t)
	c := srv.Client(t)
	b := newBus(t, c, bus.Config{})
	ctx := context.Background()
	name := valkeytest.TestName(t)
	q := keys.MustQueue(name)
	const (
		limit = 3
		conc  = 20
		lease = time.Second
	)
	capped, other, kills := laneCapSettings()
	require.NoError(t, b.SetLaneLimits(ctx, name, "L", bus.LaneLimits{Cap: limit}))
	enqueueLaneTasks(t, b, name, "M", "work", other/2)
	enqueueLaneTasks(t, b, name, "L", "work", capped)
	enqueueLaneTasks(t, b, name, "M", "work", other-other/2)
	start := time.Now()
	procs := make([]*proc, 3)
	gen := 0
	spawn := func(i int) {
		gen++
		procs[i] = startLaneProc(t, srv.Addr, name, fmt.Sprintf("w%d.%d", i, gen), "cap", "L", limit, conc, lease, 10*time.Millisecond)
	}
	for i := range procs {
		spawn(i)
	}
	left := func() int64 {
		info, err := b.Lane(ctx, name, "L")
		require.NoError(t, err)
		return info.Waiting + info.Active
	}
	for k := 1; k <= kills; k++ {
		threshold := int64(capped) - int64(capped)*int64(k)/int64(kills+1)
		valkeytest.Eventually(t, 5*time.Minute, fmt.Sprintf("L down to %d before kill %d", threshold, k), func() bool { return left() <= threshold })
		i := rand.N(len(procs))
		procs[i].kill(t)
		spawn(i)
	}
	drained(t, b, name, 5*time.Minute)
	elapsed := time.Since(start)
	for _, p := range procs {
		p.stop(t)
	}
	counts, err := b.Counts(ctx, name)
	require.NoError(t, err)
	require.Equal(t, bus.Counts{}, counts, "after the drain every count is zero")
	violations, err := c.Do(ctx, c.B().Lrange().Key(name+".violations").Start(0).Stop(-1).Build()).AsStrSlice()
	require.NoError(t, err)
	checks, err := c.Do(ctx, c.B().Get().Key(name+".checks").Build()).AsInt64()
	require.NoError(t, err)
	require.Empty(t, violations, "a check saw more than %d of L claimed", limit)
	require.GreaterOrEqual(t, checks, int64(capped), "every job of L checked")
	left2 := scanAll(t, c, "{"+name+"}")
	require.Equal(t, []string{q.Lanes()}, slices.DeleteFunc(left2, func(k string) bool { return k == q.Wake() || k == q.Workers() }),
		"no lane state left but L's limits (and the wake list, and the workers' published stats)")
	t.Logf("cap %d, 3 processes x %d, %d SIGKILLs: %d jobs of L and %d of M drained in %v; %d checks, 0 over the cap", limit, conc, kills, capped, other, elapsed.Round(time.Millisecond), checks)
	require.NoError(t, c.Do(ctx, c.B().Del().Key(name+".checks", name+".violations").Build()).Error())
}

// laneRateSeconds is how long TestLaneRateProcesses keeps its lane backlogged: 3 s in make
// test, 10 s with EMQ_SOAK=1.
func laneRateSeconds() int {
	if os.Getenv("EMQ_SOAK") == "1" {
		return 10
	}
	return 3
}

// TestLaneRateProcesses: a lane limited to 200 claims a second with bursts of 20, backlogged
// across 3 worker processes: in every full second from the first claim the lane gets 200 ± 5 %
// claims, and no window of 100 ms holds more than 20 (claim times read on the server: the
// lease deadline less the lease).
func TestLaneRateProcesses(t *testing.T) {
	valkeytest.Timing(t)
	t.Parallel()
	srv := valkeytest.Shared(t)
	c := srv.Client(t)
	b := newBus(t, c, bus.Config{})
	ctx := context.Background()
	name := valkeytest.TestName(t)
	const (
		rate  = 200
		burst = 20
		lease = time.Minute
	)
	secs := laneRateSeconds()
	require.NoError(t, b.SetLaneLimits(ctx, name, "R", bus.LaneLimits{Rate: bus.Rate{Limit: rate, Burst: burst}}))
	enqueueLaneTasks(t, b, name, "R", "work", rate*secs+4*burst)
	procs := make([]*proc, 3)
	for i := range procs {
		procs[i] = startLaneProc(t, srv.Addr, name, fmt.Sprintf("r%d", i), "rate", "R", 0, 20, lease, time.Millisecond)
	}
	want := int64(rate*secs + burst)
	valkeytest.Eventually(t, time.Duration(secs+30)*time.Second, "the claims of the lane", func() bool {
		n, err := c.Do(ctx, c.B().Llen().Key(name+".claims").Build()).AsInt64()
		require.NoError(t, err)
		return n >= want
	})
	for _, p := range procs {
		p.stop(t)
	}
	raw, err := c.Do(ctx, c.B().Lrange().Key(name+".claims").Start(0).Stop(-1).Build()).AsStrSlice()
	require.NoError(t, err)
	at := make([]int64, len(raw))
	for i, s := range raw {
		at[i], err = strconv.ParseInt(s, 10, 64)
		require.NoError(t, err)
	}
	slices.Sort(at)
	t0 := at[0]
	var perSecond []int
	for k := 0; k < secs; k++ {
		n := 0
		for _, a := range at {
			if a >= t0+int64(k)*1000 && a < t0+int64(k+1)*1000 {
				n++
			}
		}
		perSecond = append(perSecond, n)
	}
	most, where := 0, int64(0)
	for i, a := range at {
		j := i
		for j < len(at) && at[j] < a+100 {
			j++
		}
		if j-i > most {
			most, where = j-i, a-t0
		}
	}
	gaps := make([]int64, 0, len(at))
	for i := 1; i < len(at); i++ {
		gaps = append(gaps, at[i]-at[i-1])
	}
	slices.Sort(gaps)
	t.Logf("%d a second, burst %d, 3 processes, %d s backlogged: claims per full second %v; the fullest 100 ms window holds %d (at +%d ms); gaps between claims p50 %d ms, p90 %d, p99 %d, max %d",
		rate, burst, secs, perSecond, most, where, gaps[len(gaps)/2], gaps[len(gaps)*9/10], gaps[len(gaps)*99/100], gaps[len(gaps)-1])
	for k, n := range perSecond {
		require.InDelta(t, rate, n, rate*0.05, "second %d", k)
	}
	require.LessOrEqual(t, most, burst, "a window of 100 ms over the burst")
	require.NoError(t, c.Do(ctx, c.B().Del().Key(name+".claims").Build()).Error())
}
