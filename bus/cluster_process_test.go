package bus_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// Worker processes of the cluster soak: re-executions of this test binary running only
// TestClusterWorkerProcess, with a cluster client, one worker per queue, and every run and
// event written as a line to a file of its own (not stdout, which its log shares), which the
// parent parses into its ledger:
//
//	ran <id> <token>
//	ev <event type> <id> <token> [<stale reason>]
const (
	envClusterAddrs  = "EMQ_CLUSTER_ADDRS"
	envClusterQueues = "EMQ_CLUSTER_QUEUES"
	envClusterAck    = "EMQ_CLUSTER_CLAIMACK" // "replicated" or empty
	envClusterLedger = "EMQ_CLUSTER_LEDGER"   // the file of run and event lines
)

// TestClusterWorkerProcess is the body of a cluster soak's worker process; run directly, it
// skips.
func TestClusterWorkerProcess(t *testing.T) {
	addrs := os.Getenv(envClusterAddrs)
	if addrs == "" {
		t.Skip("a worker process of the cluster soak (TestClusterSoak); not a test by itself")
	}
	c, err := valkey.NewClient(valkey.ClientOption{InitAddress: strings.Split(addrs, ","), DisableCache: true})
	require.NoError(t, err)
	defer c.Close()
	b, err := bus.New(c, bus.Config{})
	require.NoError(t, err)
	f, err := os.Create(os.Getenv(envClusterLedger))
	require.NoError(t, err)
	defer f.Close()
	var mu sync.Mutex
	out := bufio.NewWriter(f)
	line := func(format string, a ...any) {
		mu.Lock()
		fmt.Fprintf(out, format+"\n", a...)
		mu.Unlock()
	}
	flush := time.NewTicker(100 * time.Millisecond)
	defer flush.Stop()
	go func() {
		for range flush.C {
			mu.Lock()
			_ = out.Flush()
			mu.Unlock()
		}
	}()
	cfg := bus.WorkerConfig{Concurrency: 8, Lease: 2 * time.Second, HousekeepInterval: 300 * time.Millisecond}
	if os.Getenv(envClusterAck) == "replicated" {
		cfg.ClaimAck = bus.Ack{Durability: bus.Replicated, Timeout: 500 * time.Millisecond}
	}
	var ws []*bus.Worker
	for q := range strings.SplitSeq(os.Getenv(envClusterQueues), ",") {
		wc := cfg
		wc.Queue = q
		wc.OnEvent = func(e bus.JobEvent) {
			if e.Type == bus.JobClaimed || e.Type == bus.JobExtended {
				return
			}
			reason := ""
			if se, ok := e.Err.(*bus.StaleError); ok {
				reason = " " + strings.ReplaceAll(string(se.Reason), " ", "_")
			}
			line("ev %s %s %d%s", strings.ReplaceAll(e.Type.String(), " ", "_"), e.Job.ID, e.Job.Token, reason)
		}
		w, err := bus.NewWorker(b, wc)
		require.NoError(t, err)
		bus.MustHandle(w, "work", func(ctx context.Context, task *bus.Task[args]) error {
			time.Sleep(time.Millisecond)
			line("ran %s %d", task.Job.ID, task.Job.Token)
			return nil
		}, nil)
		require.NoError(t, w.Start())
		ws = append(ws, w)
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent closes it
	for _, w := range ws {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		require.NoError(t, w.Close(cctx))
		cancel()
	}
	mu.Lock()
	_ = out.Flush()
	mu.Unlock()
}

// clusterProc is one worker process of the cluster soak.
type clusterProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    string // stdout and stderr
	ledger string // run and event lines
}

func startClusterProc(t *testing.T, cl *valkeytest.Cluster, queues []string, name string, claimAck bool) *clusterProc {
	t.Helper()
	dir := t.TempDir()
	out, ledger := filepath.Join(dir, name+".out"), filepath.Join(dir, name+".ledger")
	f, err := os.Create(out)
	require.NoError(t, err)
	defer f.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestClusterWorkerProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), envClusterAddrs+"="+strings.Join(cl.Addrs(), ","), envClusterQueues+"="+strings.Join(queues, ","), envClusterLedger+"="+ledger)
	if claimAck {
		cmd.Env = append(cmd.Env, envClusterAck+"=replicated")
	}
	cmd.Stdout, cmd.Stderr = f, f
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &clusterProc{cmd: cmd, stdin: stdin, out: out, ledger: ledger}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
			_ = p.cmd.Wait()
		}
	})
	return p
}

// stop closes the process's stdin and waits for it to exit 0.
func (p *clusterProc) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, p.stdin.Close())
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			data, _ := os.ReadFile(p.out)
			lines := strings.Split(strings.TrimSpace(string(data)), "\n")
			t.Fatalf("worker process %s: %v; last lines:\n%s", p.out, err, strings.Join(lines[max(0, len(lines)-20):], "\n"))
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("worker process %s did not exit within 60 s of closing its stdin", p.out)
	}
}

// readInto parses the process's lines into led.
func (p *clusterProc) readInto(t *testing.T, led *ledger) {
	t.Helper()
	f, err := os.Open(p.ledger)
	require.NoError(t, err)
	defer f.Close()
	types := map[string]bus.JobEventType{}
	for typ := bus.JobClaimed; typ <= bus.JobCancelled; typ++ {
		types[strings.ReplaceAll(typ.String(), " ", "_")] = typ
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		switch {
		case len(fs) == 3 && fs[0] == "ran":
			id, err := keys.ParseJobID(fs[1])
			require.NoError(t, err)
			tok, _ := strconv.ParseInt(fs[2], 10, 64)
			led.ran(id, tok)
		case len(fs) >= 4 && fs[0] == "ev":
			id, err := keys.ParseJobID(fs[2])
			require.NoError(t, err)
			tok, _ := strconv.ParseInt(fs[3], 10, 64)
			reason := ""
			if len(fs) > 4 {
				reason = strings.ReplaceAll(fs[4], "_", " ")
			}
			led.event(types[fs[1]], id, tok, reason)
		}
	}
	require.NoError(t, sc.Err())
}
