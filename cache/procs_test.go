package cache_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/tables"
)

// The multi-process tests re-run this test binary as child processes (TestHelperProcess),
// each a cache over the same server. The environment tells a child what to do.
const (
	envHelper  = "ECHOCACHE_TEST_HELPER" // "fill": run the fill helper
	envAddrs   = "ECHOCACHE_TEST_ADDRS"  // comma-separated server addresses
	envTable   = "ECHOCACHE_TEST_TABLE"
	envMode    = "ECHOCACHE_TEST_MODE" // "once": loads take 300 ms; "kill": the first load hangs
	envWorkers = "ECHOCACHE_TEST_WORKERS"
	envShards  = "ECHOCACHE_TEST_SHARDS" // the table's tables.Spec.Shards
)

// helperKeys are the helper's own keys (a test prefix, not the cache's): a counter of loader
// runs across every process, and the pid of the process whose loader runs first.
func helperKeys(table string) (counter, holder string) {
	return "cachetest:{" + table + "}:loads", "cachetest:{" + table + "}:holder"
}

// TestHelperProcess is a child of the multi-process tests, not a test of its own.
func TestHelperProcess(t *testing.T) {
	var run func() error
	switch os.Getenv(envHelper) {
	case "fill":
		run = runFillHelper
	case "propagate":
		run = runPropagateHelper
	case "load":
		run = runLoadHelper
	default:
		t.Skip("runs only as a child of the multi-process tests")
	}
	if err := run(); err != nil {
		fmt.Printf("RESULT error %v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// runFillHelper makes a cache and table, says READY, waits for GO on stdin, then has its
// workers Get one id at once and prints "RESULT ok=<n> bad=<n> <first error>".
func runFillHelper() error {
	table, mode := os.Getenv(envTable), os.Getenv(envMode)
	workers, err := strconv.Atoi(os.Getenv(envWorkers))
	if err != nil {
		return err
	}
	client, err := valkey.NewClient(valkey.ClientOption{InitAddress: strings.Split(os.Getenv(envAddrs), ","), DisableCache: true})
	if err != nil {
		return err
	}
	defer client.Close()
	c, err := cache.New(client, cache.Config{})
	if err != nil {
		return err
	}
	defer c.Close()
	counter, holder := helperKeys(table)
	load := func(ctx context.Context, id string) (string, error) {
		n, err := client.Do(ctx, client.B().Incr().Key(counter).Build()).AsInt64()
		if err != nil {
			return "", err
		}
		if mode == "kill" && n == 1 {
			// The first filler announces itself and hangs until it is SIGKILLed.
			if err := client.Do(ctx, client.B().Set().Key(holder).Value(strconv.Itoa(os.Getpid())).Build()).Error(); err != nil {
				return "", err
			}
			time.Sleep(time.Hour)
		}
		time.Sleep(300 * time.Millisecond) // long enough for every process to miss meanwhile
		return "value-of-" + id, nil
	}
	// 1000 misses at once on a shared machine can keep Valkey past the default L2Timeout,
	// and then degraded mode would load beside the fill; this test is about the fill.
	tbl, err := cache.NewTable(c, tables.Spec{Name: table, LoaderTimeout: time.Second, L2Timeout: 10 * time.Second}, load, nil)
	if err != nil {
		return err
	}
	fmt.Println("READY")
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "GO" {
		return fmt.Errorf("waiting for GO: %q, %v", line, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, bad, first := 0, 0, ""
	for range workers {
		wg.Go(func() {
			v, err := tbl.Get(ctx, "hot")
			mu.Lock()
			defer mu.Unlock()
			if err == nil && v == "value-of-hot" {
				ok++
				return
			}
			bad++
			if first == "" {
				first = fmt.Sprintf("%q %v", v, err)
			}
		})
	}
	wg.Wait()
	st := tbl.Stats()
	fmt.Printf("RESULT ok=%d bad=%d takeovers=%d | %s\n", ok, bad, st.LeaseTakeovers, first)
	return nil
}

// child is one helper process.
type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stderr bytes.Buffer
}

func startChild(t *testing.T, env []string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	ch := &child{cmd: cmd, lines: make(chan string, 16)}
	cmd.Stderr = &ch.stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	ch.stdin = stdin
	require.NoError(t, cmd.Start())
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			ch.lines <- sc.Text()
		}
		close(ch.lines)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("child %d stderr:\n%s", cmd.Process.Pid, ch.stderr.String())
		}
	})
	return ch
}

// expect waits for a line starting with prefix.
func (c *child) expect(t *testing.T, prefix string, d time.Duration) string {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case line, ok := <-c.lines:
			if !ok {
				t.Fatalf("child %d ended before %q; stderr:\n%s", c.cmd.Process.Pid, prefix, c.stderr.String())
			}
			if strings.HasPrefix(line, prefix) {
				return line
			}
		case <-deadline:
			t.Fatalf("child %d: no %q within %v", c.cmd.Process.Pid, prefix, d)
		}
	}
}

// TestSingleFlightProcesses: 4 processes x 250 goroutines miss one id at once. The loader
// runs once in all; and when the process holding the fill lease is SIGKILLed mid-load,
// another process takes the lease over once it expires and every surviving caller gets the
// value (the loader then ran twice: the dead one and the takeover).
func TestSingleFlightProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	t.Parallel()
	const procs, workers = 4, 250
	for _, tg := range []struct {
		name  string
		addrs func(t *testing.T) []string
	}{
		{"standalone", func(t *testing.T) []string { return []string{valkeytest.Shared(t).Addr} }},
		{"cluster", func(t *testing.T) []string { return valkeytest.SharedCluster(t).Addrs() }},
	} {
		for _, mode := range []string{"once", "kill"} {
			t.Run(tg.name+"/"+mode, func(t *testing.T) {
				t.Parallel()
				addrs := tg.addrs(t)
				client := valkeytest.Shared(t).Client(t)
				if tg.name == "cluster" {
					client = valkeytest.SharedCluster(t).Client(t)
				}
				table := tableName(t)
				counter, holder := helperKeys(table)
				env := []string{envHelper + "=fill", envAddrs + "=" + strings.Join(addrs, ","),
					envTable + "=" + table, envMode + "=" + mode, envWorkers + "=" + strconv.Itoa(workers)}
				children := make([]*child, procs)
				for i := range children {
					children[i] = startChild(t, env)
				}
				for _, ch := range children {
					ch.expect(t, "READY", 60*time.Second)
				}
				for _, ch := range children {
					_, err := io.WriteString(ch.stdin, "GO\n")
					require.NoError(t, err)
				}

				survivors := children
				if mode == "kill" {
					var pid int
					valkeytest.Eventually(t, 30*time.Second, "a lease holder to start loading", func() bool {
						s := readRaw(t, client, holder)
						pid, _ = strconv.Atoi(s)
						return pid > 0
					})
					survivors = nil
					for _, ch := range children {
						if ch.cmd.Process.Pid == pid {
							require.NoError(t, ch.cmd.Process.Signal(syscall.SIGKILL))
						} else {
							survivors = append(survivors, ch)
						}
					}
					require.Len(t, survivors, procs-1, "the holder is one of the children")
				}
				takeovers := 0
				for _, ch := range survivors {
					line := ch.expect(t, "RESULT", 60*time.Second)
					var ok, bad, took int
					_, err := fmt.Sscanf(line, "RESULT ok=%d bad=%d takeovers=%d", &ok, &bad, &took)
					require.NoError(t, err, line)
					require.Equal(t, [2]int{workers, 0}, [2]int{ok, bad}, "every caller gets the value: %s", line)
					takeovers += took
				}
				loads, err := client.Do(context.Background(), client.B().Get().Key(counter).Build()).AsInt64()
				require.NoError(t, err)
				want, wantTakeovers := int64(1), 0
				if mode == "kill" {
					want, wantTakeovers = 2, 1 // the killed holder's run, and the one takeover's
				}
				require.Equal(t, want, loads, "loader runs across all processes")
				require.Equal(t, wantTakeovers, takeovers, "processes that took over a dead filler's lease")
			})
		}
	}
}
