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
	"github.com/echocache/echocache/lua"
)

// The scheduler crash test runs schedulers as processes of their own, re-executions of this
// test binary that run only TestSchedulerProcess. A scheduler process records every fire the
// server accepted (periodic_fire answered 1) into a test-only key outside the grammar:
//
//	<queue>.fired   hash tick -> how many accepted fires of that tick this run saw,
//	                written after the reply came back
const (
	envSchedAddr  = "EMQ_SCHED_ADDR"
	envSchedQueue = "EMQ_SCHED_QUEUE"
)

// TestSchedulerProcess is the body of a scheduler process; run directly, it skips.
func TestSchedulerProcess(t *testing.T) {
	addr := os.Getenv(envSchedAddr)
	if addr == "" {
		t.Skip("a scheduler process of TestSchedulerKill; not a test by itself")
	}
	queue := os.Getenv(envSchedQueue)
	c, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	require.NoError(t, err)
	defer c.Close()
	b, err := bus.New(&fireRecorder{Client: c, fired: queue + ".fired"}, bus.Config{})
	require.NoError(t, err)
	s, err := bus.NewScheduler(b, bus.SchedulerConfig{Queue: queue, Refresh: 200 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	require.NoError(t, err)
	require.NoError(t, s.Start())
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent closes it
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, s.Close(ctx))
	fmt.Printf("stats %+v\n", s.Stats())
}

// fireRecorder is a client that, after a pipeline, counts each periodic_fire the server
// answered 1 in a hash by its tick. It sees only the wire: what the server accepted.
type fireRecorder struct {
	valkey.Client
	fired string
}

func (r *fireRecorder) DoMulti(ctx context.Context, multi ...valkey.Completed) []valkey.ValkeyResult {
	fire := lua.Get("periodic_fire")
	ticks := make([]string, len(multi)) // read before sending: commands are recycled after
	for i, cmd := range multi {
		if cs := cmd.Commands(); len(cs) == 10 && (cs[0] == "EVALSHA" && cs[1] == fire.SHA1 || cs[0] == "EVAL" && cs[1] == fire.Source) {
			ticks[i] = cs[7]
		}
	}
	res := r.Client.DoMulti(ctx, multi...)
	var rec valkey.Commands
	for i, tick := range ticks {
		if n, err := res[i].AsInt64(); tick != "" && err == nil && n == 1 {
			rec = append(rec, r.Client.B().Hincrby().Key(r.fired).Field(tick).Increment(1).Build())
		}
	}
	if len(rec) > 0 {
		for _, e := range r.Client.DoMulti(context.WithoutCancel(ctx), rec...) {
			if err := e.Error(); err != nil {
				fmt.Fprintf(os.Stderr, "recording a fire: %v\n", err)
			}
		}
	}
	return res
}

// schedProc is one scheduler process.
type schedProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   string
}

func startSchedProc(t *testing.T, addr, queue, name string) *schedProc {
	t.Helper()
	out := filepath.Join(t.TempDir(), name+".out")
	f, err := os.Create(out)
	require.NoError(t, err)
	defer f.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSchedulerProcess$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), envSchedAddr+"="+addr, envSchedQueue+"="+queue)
	cmd.Stdout, cmd.Stderr = f, f
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &schedProc{cmd: cmd, stdin: stdin, out: out}
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
		if t.Failed() {
			data, _ := os.ReadFile(out)
			t.Logf("scheduler process %s:\n%s", name, data)
		}
	})
	return p
}

func (p *schedProc) ready() bool {
	data, _ := os.ReadFile(p.out)
	return strings.Contains(string(data), "ready\n")
}

// TestSchedulerKill: 3 scheduler processes fire one schedule every 100 ms under MissedCatchUp
// for 10 s (30 s under EMQ_SOAK=1) while a random one is SIGKILLed and started again every 3 s
// (2 s under soak). Every tick of the span has exactly one job under its deterministic id (0
// gaps, 0 duplicates), and no tick was accepted twice on the wire. A SIGKILL between an
// accepted fire and its record leaves the fire unrecorded; those are counted apart.
func TestSchedulerKill(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Shared(t)
	c := srv.Client(t)
	b := newBus(t, c, bus.Config{})
	ctx := context.Background()
	name := valkeytest.TestName(t)
	q := keys.MustQueue(name)
	d, killEvery := soakDuration(), 3*time.Second
	if os.Getenv("EMQ_SOAK") == "1" {
		killEvery = 2 * time.Second
	}
	procs := make([]*schedProc, 3)
	gen := 0
	spawn := func(i int) {
		gen++
		procs[i] = startSchedProc(t, srv.Addr, name, fmt.Sprintf("s%d.%d", i, gen))
	}
	for i := range procs {
		spawn(i)
	}
	valkeytest.Eventually(t, time.Minute, "3 scheduler processes ready", func() bool {
		return procs[0].ready() && procs[1].ready() && procs[2].ready()
	})
	// CatchUp covers a process restart with the other two busy on two shared cores.
	require.NoError(t, b.DeclarePeriodic(ctx, name, bus.Periodic{Name: "p", Every: 100 * time.Millisecond, Payload: []byte("x"), Missed: bus.MissedCatchUp, CatchUp: 50}))
	declared := lastOf(t, c, q, "p")
	kills := 0
	for end := time.Now().Add(d); time.Now().Before(end); {
		time.Sleep(min(killEvery, time.Until(end))) // the fault schedule under test
		if time.Now().Before(end) {
			i := rand.N(len(procs))
			require.NoError(t, procs[i].cmd.Process.Signal(syscall.SIGKILL))
			_ = procs[i].cmd.Wait()
			kills++
			spawn(i)
		}
	}
	for _, p := range procs {
		require.NoError(t, p.stdin.Close())
		require.NoError(t, p.cmd.Wait())
	}
	ticks, dups, gaps := checkEveryTick(t, c, name, q, "p", 100, declared)
	fired, err := c.Do(ctx, c.B().Hgetall().Key(name+".fired").Build()).AsIntMap()
	require.NoError(t, err)
	twice, recorded := 0, 0
	for tick, n := range fired {
		ms, err := strconv.ParseInt(tick, 10, 64)
		require.NoError(t, err)
		require.Zero(t, ms%100, "a recorded tick is a tick")
		recorded++
		if n > 1 {
			twice++
		}
	}
	t.Logf("3 scheduler processes, %v, %d SIGKILLs: %d ticks, %d jobs, %d duplicates, %d gaps; %d fires accepted twice; %d accepted fires unrecorded because their process was killed first",
		d, kills, ticks, ticks-gaps+dups, dups, gaps, twice, ticks-recorded)
	require.Zero(t, dups)
	require.Zero(t, gaps)
	require.Zero(t, twice, "a tick accepted twice")
	require.LessOrEqual(t, recorded, ticks)
	require.LessOrEqual(t, ticks-recorded, kills*50, "at most one pipeline of fires unrecorded per kill")
	require.GreaterOrEqual(t, ticks, int(d/(100*time.Millisecond))-10, "the span covers the run")
	require.NoError(t, c.Do(ctx, c.B().Del().Key(name+".fired").Build()).Error())
}
