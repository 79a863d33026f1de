// Command emqprofile measures where an EchoMQ worker's time goes, so that a change to the
// worker's loop or to its scripts is measured the same way every time. `make bench-profile`
// (bench/run.sh profile) runs it against a throwaway valkey-server of its own; it needs a
// server at -addr (default $VALKEY_ADDR) that nothing else loads.
//
// For each concurrency it enqueues -jobs no-op tasks (untimed), starts a bus.Worker with a
// no-op typed handler (its args are decoded, as in BenchmarkBusJobs) and measures the drain
// twice:
//
//   - plain: jobs/s, the server's CPU per job (INFO cpu: the whole process and its main
//     thread), the server time inside EVALSHA per job (INFO commandstats), and this process's
//     CPU per job (getrusage: the worker, valkey-go and the Go runtime; nothing else runs in
//     it during the drain);
//   - traced: the slow log at a threshold of 0 µs, read and reset every 5 ms, so every EVALSHA
//     is attributed to its script by SHA1: calls per job, µs per call and µs per job of each
//     script, and jobs per claim (jobs claimed over calls of the scripts that claim). Logging
//     every command costs the server CPU and slows the scripts too (their total comes out
//     above the plain drain's EVALSHA µs per job), so the plain drain's figures are the ones
//     to quote for CPU, and the traced ones tell the shares of the scripts.
//
// The worker's own counters add round trips per job and the mean number of round trips in
// flight (the time integral of round trips in flight over the drain, by Little's law).
//
// Figures are medians over -rounds; on a shared machine absolute figures are noisy, ratios
// of two configurations in the same run much less so.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/keys"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "emqprofile:", err)
		os.Exit(1)
	}
}

// config is one worker configuration the profile measures.
type config struct {
	concurrency, prefetch int  // prefetch: WorkerConfig.Prefetch
	named                 bool // -prefetch was given: the label names the prefetch
	lanes                 int  // the jobs are spread over this many lanes; 0: none
}

func (c config) String() string {
	s := fmt.Sprintf("c=%d", c.concurrency)
	if c.named {
		switch {
		case c.prefetch == 0:
			s += " prefetch=auto"
		case c.prefetch < 0:
			s += " prefetch=none"
		default:
			s += fmt.Sprintf(" prefetch=%d", c.prefetch)
		}
	}
	if c.lanes > 0 {
		s += fmt.Sprintf(" lanes=%d", c.lanes)
	}
	return s
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("emqprofile", flag.ContinueOnError)
	addr := fs.String("addr", os.Getenv("VALKEY_ADDR"), "valkey-server address (default $VALKEY_ADDR)")
	jobs := fs.Int("jobs", 20000, "jobs per drain")
	conc := fs.String("c", "20,100", "worker concurrencies, comma-separated")
	prefetch := fs.String("prefetch", "", "WorkerConfig.Prefetch values, comma-separated: 0 the automatic buffer (the default), -1 none, N a buffer of N (default: the worker's default only)")
	rounds := fs.Int("rounds", 3, "rounds (the figures are medians over them)")
	lanes := fs.String("lanes", "0", "lane counts, comma-separated: each drain spreads its jobs evenly over that many lanes (0: none)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *addr == "" {
		return errors.New("no server: pass -addr or set VALKEY_ADDR")
	}
	cs, err := ints(*conc)
	if err != nil {
		return fmt.Errorf("-c: %w", err)
	}
	ps := []int{0}
	if *prefetch != "" {
		if ps, err = ints(*prefetch); err != nil {
			return fmt.Errorf("-prefetch: %w", err)
		}
	}
	ls, err := ints(*lanes)
	if err != nil {
		return fmt.Errorf("-lanes: %w", err)
	}
	var configs []config
	for _, c := range cs {
		for _, p := range ps {
			for _, l := range ls {
				configs = append(configs, config{concurrency: c, prefetch: p, named: *prefetch != "", lanes: l})
			}
		}
	}
	client, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{*addr}, DisableCache: true})
	if err != nil {
		return err
	}
	defer client.Close()
	ctx := context.Background()
	results := map[config][]result{}
	for r := 1; r <= *rounds; r++ {
		for _, cfg := range configs {
			fmt.Fprintf(os.Stderr, "emqprofile: round %d/%d, %v\n", r, *rounds, cfg)
			plain, err := drain(ctx, client, cfg, *jobs, false)
			if err != nil {
				return fmt.Errorf("%v: %w", cfg, err)
			}
			traced, err := drain(ctx, client, cfg, *jobs, true)
			if err != nil {
				return fmt.Errorf("%v traced: %w", cfg, err)
			}
			plain.scripts, plain.claimCalls = traced.scripts, traced.claimCalls
			results[cfg] = append(results[cfg], plain)
		}
	}
	report(out, *jobs, *rounds, configs, results)
	return nil
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// result is one drain's figures, per job where it says so.
type result struct {
	jobsPerSec    float64
	serverCPU     float64 // µs per job, whole process
	serverMain    float64 // µs per job, main thread
	evalshaUs     float64 // µs per job inside EVALSHA (commandstats)
	clientCPU     float64 // µs per job, this process
	roundTrips    float64 // per job; 0 when the worker does not count them
	inFlight      float64 // mean round trips in flight; 0 when not counted
	scripts       map[string]*scriptCost
	claimCalls    int64
	jobs          int
	hasRoundTrips bool
}

type jobArgs struct {
	OrderID int64  `json:"order_id"`
	Action  string `json:"action"`
	Amount  int64  `json:"amount"`
}

var queueSeq atomic.Int64

// drain enqueues n jobs, runs one worker of cfg until all n completed, and measures.
func drain(ctx context.Context, c valkey.Client, cfg config, n int, traced bool) (result, error) {
	b, err := bus.New(c, bus.Config{})
	if err != nil {
		return result{}, err
	}
	queue := fmt.Sprintf("emqprofile.%d.%d", os.Getpid(), queueSeq.Add(1))
	payload, err := bus.EncodeTask("noop", jobArgs{OrderID: 123456, Action: "settle", Amount: 4200}, nil)
	if err != nil {
		return result{}, err
	}
	batch := make([]bus.NewJob, 1000)
	for i := range batch {
		batch[i].Payload = payload
	}
	for l := range max(cfg.lanes, 1) {
		var opts *bus.EnqueueOpts
		left := n
		if cfg.lanes > 0 {
			opts = &bus.EnqueueOpts{Lane: "lane-" + strconv.Itoa(l)}
			left = n/cfg.lanes + min(1, max(0, n%cfg.lanes-l))
		}
		for ; left > 0; left -= len(batch) {
			if _, err := b.EnqueueBatch(ctx, queue, batch[:min(len(batch), left)], opts); err != nil {
				return result{}, err
			}
		}
	}
	var completed atomic.Int64
	done := make(chan struct{})
	wcfg := bus.WorkerConfig{Queue: queue, Concurrency: cfg.concurrency, Prefetch: cfg.prefetch, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnEvent: func(e bus.JobEvent) {
			if e.Type == bus.JobCompleted && completed.Add(1) == int64(n) {
				close(done)
			}
		}}
	w, err := bus.NewWorker(b, wcfg)
	if err != nil {
		return result{}, err
	}
	bus.MustHandle(w, "noop", func(context.Context, *bus.Task[jobArgs]) error { return nil }, nil)

	var tr *tracer
	if traced {
		if tr, err = startTracer(ctx, c); err != nil {
			return result{}, err
		}
	}
	before, err := readServer(ctx, c)
	if err != nil {
		return result{}, err
	}
	cpu0 := selfCPU()
	start := time.Now()
	if err := w.Start(); err != nil {
		return result{}, err
	}
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		return result{}, fmt.Errorf("%d of %d jobs completed in 5 minutes", completed.Load(), n)
	}
	elapsed := time.Since(start)
	cpu1 := selfCPU()
	after, err := readServer(ctx, c)
	if err != nil {
		return result{}, err
	}
	stats := w.Stats()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := w.Close(cctx); err != nil {
		return result{}, err
	}
	perJob := func(seconds float64) float64 { return seconds * 1e6 / float64(n) }
	r := result{
		jobs:       n,
		jobsPerSec: float64(n) / elapsed.Seconds(),
		serverCPU:  perJob(after.cpu - before.cpu),
		serverMain: perJob(after.cpuMain - before.cpuMain),
		evalshaUs:  float64(after.usec["evalsha"]+after.usec["eval"]-before.usec["evalsha"]-before.usec["eval"]) / float64(n),
		clientCPU:  perJob((cpu1 - cpu0).Seconds()),
	}
	r.roundTrips, r.inFlight, r.hasRoundTrips = roundTrips(stats, n, elapsed)
	if tr != nil {
		if r.scripts, err = tr.finish(ctx); err != nil {
			return result{}, err
		}
		for name, sc := range r.scripts {
			if claims(name) {
				r.claimCalls += sc.calls
			}
		}
	}
	q := keys.MustQueue(queue)
	_ = c.Do(ctx, c.B().Del().Key(q.Pending(), q.Active(), q.Schedule(), q.Dead(), q.Meta(), q.Wake(), q.Flow(), q.LaneReady(), q.LaneWait(), q.LaneActive(), q.JobLane()).Build()).Error()
	return r, nil
}

// claims reports whether a script claims jobs: its calls count in jobs per claim.
func claims(script string) bool {
	return script == "claim" || script == "completeclaim" || script == "laneclaim"
}

// selfCPU is this process's user and system CPU so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func report(out io.Writer, n, rounds int, configs []config, results map[config][]result) {
	fmt.Fprintf(out, "EchoMQ worker profile: %d no-op jobs per drain, medians of %d rounds (plain drains for jobs/s and CPU; traced drains, slow log at 0 µs, for the scripts)\n\n", n, rounds)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "config\tjobs/s\tserver CPU µs/job\tserver main thread µs/job\tEVALSHA µs/job\tclient CPU µs/job\tjobs per claim\tround trips/job\tround trips in flight\t")
	for _, cfg := range configs {
		rs := results[cfg]
		col := func(f func(result) float64) float64 {
			xs := make([]float64, len(rs))
			for i, r := range rs {
				xs[i] = f(r)
			}
			return median(xs)
		}
		rt, fl := "n/a", "n/a"
		if len(rs) > 0 && rs[0].hasRoundTrips {
			rt = fmt.Sprintf("%.3f", col(func(r result) float64 { return r.roundTrips }))
			fl = fmt.Sprintf("%.2f", col(func(r result) float64 { return r.inFlight }))
		}
		fmt.Fprintf(tw, "%v\t%.0f\t%.2f\t%.2f\t%.2f\t%.2f\t%.1f\t%s\t%s\t\n", cfg,
			col(func(r result) float64 { return r.jobsPerSec }),
			col(func(r result) float64 { return r.serverCPU }),
			col(func(r result) float64 { return r.serverMain }),
			col(func(r result) float64 { return r.evalshaUs }),
			col(func(r result) float64 { return r.clientCPU }),
			col(func(r result) float64 {
				if r.claimCalls == 0 {
					return 0
				}
				return float64(r.jobs) / float64(r.claimCalls)
			}), rt, fl)
	}
	tw.Flush()
	fmt.Fprintln(out)
	fmt.Fprintln(out, "server time by script (traced drains, inflated by the tracing: read them as shares): calls per job, µs per call, µs per job")
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "config\tscript\tcalls/job\tµs/call\tµs/job\t")
	for _, cfg := range configs {
		rs := results[cfg]
		names := map[string]bool{}
		for _, r := range rs {
			for name := range r.scripts {
				names[name] = true
			}
		}
		sorted := make([]string, 0, len(names))
		for name := range names {
			sorted = append(sorted, name)
		}
		sort.Strings(sorted)
		total := make([]float64, len(rs))
		for _, name := range sorted {
			var calls, perCall, perJob []float64
			for i, r := range rs {
				sc := r.scripts[name]
				if sc == nil {
					sc = &scriptCost{}
				}
				calls = append(calls, float64(sc.calls)/float64(r.jobs))
				if sc.calls > 0 {
					perCall = append(perCall, float64(sc.usec)/float64(sc.calls))
				}
				perJob = append(perJob, float64(sc.usec)/float64(r.jobs))
				total[i] += float64(sc.usec) / float64(r.jobs)
			}
			fmt.Fprintf(tw, "%v\t%s\t%.4f\t%.2f\t%.2f\t\n", cfg, name, median(calls), median(perCall), median(perJob))
		}
		fmt.Fprintf(tw, "%v\tall scripts\t\t\t%.2f\t\n", cfg, median(total))
	}
	tw.Flush()
}
