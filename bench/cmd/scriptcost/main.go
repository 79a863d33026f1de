// Command scriptcost counts the server's instructions per job of the scripts an EchoMQ worker
// runs, for a queue without lanes and for queues with lanes, so that a change to a claim
// script is measured without the noise of a shared machine: an instruction count is the same
// from run to run (within about 1.5%), where a time is not. `make bench-instructions`
// (bench/instructions.sh) runs it against a valkey-server of its own under valgrind's
// callgrind.
//
// For each configuration it enqueues -jobs no-op jobs (untimed), then drains them as the
// worker does at its steady state, with one script per round trip: completeclaim for a queue
// without lanes, laneclaim for one with lanes, each call retiring the jobs the previous call
// claimed and claiming -per more (the worker claims about 18 a call at concurrency 20, see
// make bench-profile). Around each drain it zeroes callgrind's counters and dumps them
// (callgrind_control), and reads the dump's total: the instructions the server ran for the
// drain, enqueues excluded.
//
//   - plain: no lane, no limits;
//   - lanes: the jobs spread over -lanes lanes, no limits;
//   - lanes+cap: the same with a default lane cap that never binds;
//   - lanes+rate: the same with a default lane rate that never binds (1,000,000 a second,
//     bursts of 1,000): what keeping the rate's log costs.
//
// Without -pid it drains on any server and prints the jobs drained only (a smoke test).
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "scriptcost:", err)
		os.Exit(1)
	}
}

// config is one queue shape the tool drains.
type config struct {
	name  string
	lanes int
	lim   bus.LaneLimits
}

var configs = []config{
	{name: "plain"},
	{name: "lanes", lanes: 100},
	{name: "lanes+cap", lanes: 100, lim: bus.LaneLimits{Cap: 100_000}},
	{name: "lanes+rate", lanes: 100, lim: bus.LaneLimits{Rate: bus.Rate{Limit: 1_000_000, Burst: 1000}}},
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("scriptcost", flag.ContinueOnError)
	addr := fs.String("addr", os.Getenv("VALKEY_ADDR"), "the server (default $VALKEY_ADDR)")
	pid := fs.Int("pid", 0, "the pid of the valgrind process the server runs under (callgrind); 0: no counts")
	dumps := fs.String("dumps", "", "the directory callgrind writes its dumps to (--callgrind-out-file)")
	jobs := fs.Int("jobs", 2000, "jobs per drain")
	per := fs.Int("per", 18, "jobs each call claims")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *addr == "" {
		return errors.New("-addr (or $VALKEY_ADDR) is required")
	}
	if *jobs < 1 || *per < 1 || *per > 1000 {
		return errors.New("-jobs must be at least 1 and -per in [1, 1000]")
	}
	c, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{*addr}, DisableCache: true})
	if err != nil {
		return err
	}
	defer c.Close()
	ctx := context.Background()
	// The drains' scripts are loaded before the first count: loading one (its SHA1, its
	// compilation) costs the server as much as hundreds of calls, once, and is not what a
	// job costs.
	for _, name := range []string{"claim", "completeclaim", "laneclaim"} {
		if err := c.Do(ctx, c.B().ScriptLoad().Script(lua.Get(name).Source).Build()).Error(); err != nil {
			return fmt.Errorf("loading %s: %w", name, err)
		}
	}
	var counts []float64
	for _, cfg := range configs {
		q, err := fill(ctx, c, cfg, *jobs)
		if err != nil {
			return fmt.Errorf("%s: %w", cfg.name, err)
		}
		if *pid != 0 {
			if err := callgrind("-z", *pid); err != nil {
				return err
			}
		}
		n, err := drain(ctx, c, q, cfg.lanes > 0, *per)
		if err != nil {
			return fmt.Errorf("%s: %w", cfg.name, err)
		}
		if n != *jobs {
			return fmt.Errorf("%s: drained %d of %d jobs", cfg.name, n, *jobs)
		}
		if *pid == 0 {
			fmt.Fprintf(out, "%s: drained %d jobs\n", cfg.name, n)
			continue
		}
		total, err := dumpTotal(*pid, *dumps)
		if err != nil {
			return err
		}
		counts = append(counts, float64(total)/float64(n))
	}
	if *pid == 0 {
		return nil
	}
	fmt.Fprintf(out, "server instructions per job (callgrind), %d jobs per drain, %d jobs claimed per call, one script per round trip\n\n", *jobs, *per)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "config\tinstructions/job\t÷ plain\t")
	for i, cfg := range configs {
		fmt.Fprintf(tw, "%s\t%.1fk\t%.2fx\t\n", cfg.name, counts[i]/1000, counts[i]/counts[0])
	}
	return tw.Flush()
}

// fill makes a fresh queue of cfg's shape holding n jobs, enqueued lane after lane.
func fill(ctx context.Context, c valkey.Client, cfg config, n int) (keys.Queue, error) {
	b, err := bus.New(c, bus.Config{})
	if err != nil {
		return keys.Queue{}, err
	}
	name := fmt.Sprintf("scriptcost-%s-%d", strings.ReplaceAll(cfg.name, "+", "-"), time.Now().UnixNano())
	if cfg.lim != (bus.LaneLimits{}) {
		if err := b.SetQueueLimits(ctx, name, bus.QueueLimits{Lanes: cfg.lim}); err != nil {
			return keys.Queue{}, err
		}
	}
	payload, err := bus.EncodeTask("noop", map[string]any{"order_id": 123456, "action": "settle", "amount": 4200}, nil)
	if err != nil {
		return keys.Queue{}, err
	}
	lanes := max(cfg.lanes, 1)
	for l := range lanes {
		var opts *bus.EnqueueOpts
		if cfg.lanes > 0 {
			opts = &bus.EnqueueOpts{Lane: fmt.Sprintf("tenant-%d", l)}
		}
		share := n/lanes + min(1, max(0, n%lanes-l))
		for share > 0 {
			batch := make([]bus.NewJob, min(share, 1000))
			for i := range batch {
				batch[i].Payload = payload
			}
			if _, err := b.EnqueueBatch(ctx, name, batch, opts); err != nil {
				return keys.Queue{}, err
			}
			share -= len(batch)
		}
	}
	return keys.MustQueue(name), nil
}

// drain claims and retires every job of q as the worker's loop does: each call retires what
// the previous one claimed and claims per more, until a call claims none. It returns how
// many jobs were retired.
func drain(ctx context.Context, c valkey.Client, q keys.Queue, lanes bool, per int) (int, error) {
	sc := lua.Get("completeclaim")
	ks := []string{q.Pending(), q.Active(), q.Schedule(), q.Meta()}
	if lanes {
		sc = lua.Get("laneclaim")
		ks = []string{q.Pending(), q.Active(), q.Schedule(), q.Meta(), q.Flow(), q.Lanes(), q.LaneActive(), q.LaneReady(), q.LaneWait(), q.JobLane(), q.Urgent()}
	}
	head := []string{"30000", strconv.Itoa(per), "0"}
	var held []string // id, token of each job the last call claimed
	if !lanes {
		// completeclaim retires at least one job: the first claim is claim's.
		arr, err := lua.Get("claim").Exec(ctx, c, ks, head).ToArray()
		if err != nil {
			return 0, err
		}
		if held, err = claimed(arr, 3); err != nil {
			return 0, err
		}
	}
	done := 0
	for {
		arr, err := sc.Exec(ctx, c, ks, append(append([]string(nil), head...), held...)).ToArray()
		if err != nil {
			return done, err
		}
		done += len(held) / 2
		if lanes {
			if len(arr) < 5 {
				return done, fmt.Errorf("laneclaim replied %d elements", len(arr))
			}
			held, err = claimed(arr[5:], 4)
		} else {
			if len(arr) != 4 {
				return done, fmt.Errorf("completeclaim replied %d elements", len(arr))
			}
			var list []valkey.ValkeyMessage
			if list, err = arr[3].ToArray(); err == nil {
				held, err = claimed(list, 3)
			}
		}
		if err != nil {
			return done, err
		}
		if len(held) == 0 {
			return done, nil
		}
	}
}

// claimed reads the id and token of each job of a claim's reply, step elements a job.
func claimed(arr []valkey.ValkeyMessage, step int) ([]string, error) {
	if len(arr)%step != 0 {
		return nil, fmt.Errorf("a claim replied %d elements, not a multiple of %d", len(arr), step)
	}
	out := make([]string, 0, len(arr)/step*2)
	for i := 0; i < len(arr); i += step {
		id, err := arr[i].ToString()
		if err != nil {
			return nil, err
		}
		token, err := arr[i+2].AsInt64()
		if err != nil {
			return nil, err
		}
		out = append(out, id, strconv.FormatInt(token, 10))
	}
	return out, nil
}

// callgrind runs callgrind_control with op (-z zeroes the counters, -d dumps them) on pid.
func callgrind(op string, pid int) error {
	if b, err := exec.Command("callgrind_control", op, strconv.Itoa(pid)).CombinedOutput(); err != nil {
		return fmt.Errorf("callgrind_control %s %d: %v: %s", op, pid, err, b)
	}
	return nil
}

// dumpTotal dumps pid's counters and reads the total instructions of the newest dump in dir.
func dumpTotal(pid int, dir string) (int64, error) {
	if err := callgrind("-d", pid); err != nil {
		return 0, err
	}
	files, err := filepath.Glob(filepath.Join(dir, fmt.Sprintf("cg.%d.out.*", pid)))
	if err != nil || len(files) == 0 {
		return 0, fmt.Errorf("no callgrind dump of pid %d in %s", pid, dir)
	}
	sort.Slice(files, func(i, j int) bool { return dumpIndex(files[i]) < dumpIndex(files[j]) })
	f, err := os.Open(files[len(files)-1])
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return readTotal(f)
}

// dumpIndex is the number callgrind appends to its n-th dump's file name.
func dumpIndex(file string) int {
	n, _ := strconv.Atoi(file[strings.LastIndexByte(file, '.')+1:])
	return n
}

// readTotal reads a callgrind dump's "summary:" line: the instructions it counted.
func readTotal(r io.Reader) (int64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "summary:"); ok {
			return strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("the dump has no summary line")
}
