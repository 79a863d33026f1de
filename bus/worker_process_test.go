package bus_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/bus"
)

// The crash tests run workers as processes of their own, re-executions of this test binary
// that run only TestWorkerProcess, so that SIGKILL and SIGSTOP hit a whole worker: its loop,
// its heartbeats, its connections. A worker process records what its worker reports, through
// JobEvent hooks, into keys of the test's queue name (test-only keys, outside the grammar):
//
//	<queue>.done        hash id -> how many completes of that id the worker saw accepted,
//	                    written after the complete's reply came back nil
//	<queue>.log.<name>  list of "event id token at" for every event but claimed, at the
//	                    unix µs its answer came (optional; procLog reads it without)
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
		at := time.Now().UnixMicro() // when the answer came: its record may go out much later
		var cmds valkey.Commands
		if e.Type == bus.JobCompleted {
			cmds = append(cmds, c.B().Hincrby().Key(queue+".done").Field(e.Job.ID.String()).Increment(1).Build())
		}
		if logAll && e.Type != bus.JobClaimed {
			cmds = append(cmds, c.B().Rpush().Key(queue+".log."+name).Element(fmt.Sprintf("%s %s %d %d", e.Type, e.Job.ID, e.Job.Token, at)).Build())
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

// procLog is the log of worker process who for queue: its "event id token" entries, without
// when each answer came.
func procLog(t *testing.T, c valkey.Client, queue, who string) []string {
	t.Helper()
	l, err := c.Do(context.Background(), c.B().Lrange().Key(queue+".log."+who).Start(0).Stop(-1).Build()).AsStrSlice()
	require.NoError(t, err)
	for i, e := range l {
		l[i] = e[:strings.LastIndexByte(e, ' ')]
	}
	return l
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
