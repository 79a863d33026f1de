package bus_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// The crash tests run workers as processes of their own, re-executions of this test binary
// that run only TestWorkerProcess, so that SIGKILL and SIGSTOP hit a whole worker: its loop,
// its heartbeats, its connections. A worker process records what its worker reports, through
// JobEvent hooks, into keys of the test's queue name (test-only keys, outside the grammar):
//
//	<queue>.done        hash id -> how many completes of that id the worker saw accepted,
//	                    written after the complete's reply came back nil
//	<queue>.log.<name>  list of "event id token" for every event but claimed (optional)
//	<queue>.started     hash id -> unix µs when its handler started (optional)
//	<queue>.cause       hash id -> "<cause is ErrCancelled> <unix µs>" when the handler of a
//	                    "block" task saw its context end (block runs until then)

const (
	envAddr        = "EMQ_WORKER_ADDR"
	envQueue       = "EMQ_WORKER_QUEUE"
	envName        = "EMQ_WORKER_NAME"
	envLease       = "EMQ_WORKER_LEASE"
	envWork        = "EMQ_WORKER_WORK"
	envConcurrency = "EMQ_WORKER_CONCURRENCY"
	envLog         = "EMQ_WORKER_LOG"
	envBeat        = "EMQ_WORKER_BEAT"      // optional: WorkerConfig.HeartbeatInterval
	envHousekeep   = "EMQ_WORKER_HOUSEKEEP" // optional: WorkerConfig.HousekeepInterval
	envStarted     = "EMQ_WORKER_STARTED"   // optional: "1" records <queue>.started
	envPrefetch    = "EMQ_WORKER_PREFETCH"  // optional: WorkerConfig.Prefetch
)

// TestWorkerProcess is the body of a worker process; run directly, it skips.
func TestWorkerProcess(t *testing.T) {
	addr := os.Getenv(envAddr)
	if addr == "" {
		t.Skip("a worker process of the crash tests (TestWorkerKill, TestWorkerZombie); not a test by itself")
	}
	queue, name := os.Getenv(envQueue), os.Getenv(envName)
	lease, err := time.ParseDuration(os.Getenv(envLease))
	require.NoError(t, err)
	work, err := time.ParseDuration(os.Getenv(envWork))
	require.NoError(t, err)
	concurrency, err := strconv.Atoi(os.Getenv(envConcurrency))
	require.NoError(t, err)
	logAll, started := os.Getenv(envLog) == "1", os.Getenv(envStarted) == "1"
	beat, housekeep := time.Duration(0), lease/5
	if v := os.Getenv(envBeat); v != "" {
		beat, err = time.ParseDuration(v)
		require.NoError(t, err)
	}
	if v := os.Getenv(envHousekeep); v != "" {
		housekeep, err = time.ParseDuration(v)
		require.NoError(t, err)
	}
	prefetch := 0
	if v := os.Getenv(envPrefetch); v != "" {
		prefetch, err = strconv.Atoi(v)
		require.NoError(t, err)
	}

	c, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	require.NoError(t, err)
	defer c.Close()
	b, err := bus.New(c, bus.Config{})
	require.NoError(t, err)
	ctx := context.Background()
	record := func(e bus.JobEvent) {
		var cmds valkey.Commands
		if e.Type == bus.JobCompleted {
			cmds = append(cmds, c.B().Hincrby().Key(queue+".done").Field(e.Job.ID.String()).Increment(1).Build())
		}
		if logAll && e.Type != bus.JobClaimed {
			cmds = append(cmds, c.B().Rpush().Key(queue+".log."+name).Element(fmt.Sprintf("%s %s %d", e.Type, e.Job.ID, e.Job.Token)).Build())
		}
		// A worker resumed after SIGSTOP may find the dial deadline of a connection passed while
		// it was stopped (a CI run lost a record to "dial tcp: i/o timeout"): the record is the
		// test's instrument, so a command whose connection could not be dialled, and so was
		// never sent, is sent again (the commands are pinned to be sent more than once).
		for i := range cmds {
			cmds[i] = cmds[i].Pin()
		}
		for attempt := 1; len(cmds) > 0; attempt++ {
			var again valkey.Commands
			for i, r := range c.DoMulti(ctx, cmds...) {
				if err := r.Error(); err != nil {
					fmt.Fprintf(os.Stderr, "worker %s: recording %s of %s (attempt %d): %v\n", name, e.Type, e.Job.ID, attempt, err)
					var op *net.OpError
					if errors.As(err, &op) && op.Op == "dial" && attempt < 5 {
						again = append(again, cmds[i])
					}
				}
			}
			if cmds = again; len(cmds) > 0 {
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	w, err := bus.NewWorker(b, bus.WorkerConfig{
		Queue: queue, Concurrency: concurrency, Prefetch: prefetch, Lease: lease, HousekeepInterval: housekeep,
		OnEvent: record,
		Logger:  slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	require.NoError(t, err)
	// The handler ignores its context on purpose: a paused or partitioned worker's handler
	// keeps working and then tries to record its outcome, which fencing must refuse.
	bus.MustHandle(w, "work", func(ctx context.Context, task *bus.Task[args]) error {
		if started {
			at := strconv.FormatInt(time.Now().UnixMicro(), 10)
			_ = c.Do(ctx, c.B().Hset().Key(queue+".started").FieldValue().FieldValue(task.Job.ID.String(), at).Build()).Error()
		}
		time.Sleep(work)
		return nil
	}, nil)
	// block runs until its context ends, and records why and when.
	bus.MustHandle(w, "block", func(ctx context.Context, task *bus.Task[args]) error {
		if started {
			at := strconv.FormatInt(time.Now().UnixMicro(), 10)
			_ = c.Do(ctx, c.B().Hset().Key(queue+".started").FieldValue().FieldValue(task.Job.ID.String(), at).Build()).Error()
		}
		<-ctx.Done()
		cause := context.Cause(ctx)
		v := fmt.Sprintf("%t %d", errors.Is(cause, bus.ErrCancelled), time.Now().UnixMicro())
		_ = c.Do(context.Background(), c.B().Hset().Key(queue+".cause").FieldValue().FieldValue(task.Job.ID.String(), v).Build()).Error()
		return cause
	}, nil)
	if beat != 0 {
		// Past validation: a beat of 1h with a lease of 1s is a worker that renews nothing.
		bus.SetHeartbeatInterval(w, beat)
	}
	require.NoError(t, w.Start())
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent closes it
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	require.NoError(t, w.Close(cctx))
}

// proc is one worker process.
type proc struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   string // the file holding its stdout and stderr
}

// startProc starts a worker process with the given settings.
func startProc(t *testing.T, addr, queue, name string, lease, work time.Duration, concurrency int, logAll bool, env ...string) *proc {
	t.Helper()
	out := filepath.Join(t.TempDir(), name+".out")
	f, err := os.Create(out)
	require.NoError(t, err)
	defer f.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestWorkerProcess$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(),
		envAddr+"="+addr, envQueue+"="+queue, envName+"="+name,
		envLease+"="+lease.String(), envWork+"="+work.String(), envConcurrency+"="+strconv.Itoa(concurrency))
	if logAll {
		cmd.Env = append(cmd.Env, envLog+"=1")
	}
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = f, f // files: no copying goroutines
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
			t.Logf("worker process %s, last lines:\n%s", name, strings.Join(lines[max(0, len(lines)-20):], "\n"))
		}
	})
	return p
}

// kill SIGKILLs the process and reaps it.
func (p *proc) kill(t *testing.T) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	_ = p.cmd.Wait()
}

// stop closes the process's stdin, so it closes its worker, and waits for it to exit 0.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, p.stdin.Close())
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		require.NoError(t, err, "worker process %s", p.name)
	case <-time.After(60 * time.Second):
		t.Fatalf("worker process %s did not exit within 60 s of closing its stdin", p.name)
	}
}

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
// no housekeeping), so its handlers' completes are what it sends, and they are refused.
func TestWorkerZombie(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  []string
		want string // the answers the zombie must get after it is continued
	}{
		{"heartbeat", nil, "lease lost "},
		{"complete", []string{envBeat + "=1h", envHousekeep + "=-1ns"}, "stale "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			zombieCase(t, tc.env, tc.want)
		})
	}
}

func zombieCase(t *testing.T, env []string, want string) {
	srv := valkeytest.Shared(t)
	c := srv.Client(t)
	b := newBus(t, c, bus.Config{})
	ctx := context.Background()
	name := valkeytest.TestName(t)
	const lease = time.Second
	ids := enqueueTasks(t, b, name, "work", 4, "")
	zombie := startProc(t, srv.Addr, name, "zombie", lease, 3*time.Second, 4, true, env...)
	valkeytest.Eventually(t, time.Minute, "the zombie to hold the 4 jobs", func() bool {
		cs, err := b.Counts(ctx, name)
		require.NoError(t, err)
		return cs.Active == 4
	})
	logOf := func(who string) []string {
		l, err := c.Do(ctx, c.B().Lrange().Key(name+".log."+who).Start(0).Stop(-1).Build()).AsStrSlice()
		require.NoError(t, err)
		return l
	}
	require.NoError(t, zombie.cmd.Process.Signal(syscall.SIGSTOP))
	stopped := time.Now()
	time.Sleep(2 * lease) // the fault under test is a pause of twice the lease
	before := len(logOf("zombie"))

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
		after = logOf("zombie")[before:]
		heard := map[string]bool{}
		for _, e := range after {
			f := strings.Fields(e)
			heard[f[len(f)-2]] = true
		}
		return len(heard) == 4
	})
	zombie.stop(t)
	other.stop(t)
	after = logOf("zombie")[before:]
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
	for _, e := range logOf("other") {
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
	require.NoError(t, c.Do(ctx, c.B().Del().Key(name+".done", name+".log.zombie", name+".log.other").Build()).Error())
}
