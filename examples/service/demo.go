package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// `service demo`: start Valkey and two instances (demo_procs.go), drive a Zipf load of GETs
// and PUTs against them, optionally SIGKILL one midway, drain the re-index jobs, and hand what
// the load saw to the checker (summary.go).

// demoConfig is what `service demo` takes from its flags.
type demoConfig struct {
	Duration   time.Duration // how long the load runs, warm-up included
	Warmup     time.Duration // reads before this are checked but not counted in the tier figures
	Clients    int           // concurrent load goroutines
	WriteRatio float64       // share of requests that are PUTs
	Products   int           // catalog size
	ZipfS      float64       // Zipf exponent of the read distribution
	Bound      time.Duration // a read older than the newest version committed this long before it started is stale
	KillAt     time.Duration // SIGKILL instance B this far into the run; 0 means never
	Valkey     string        // use this Valkey instead of starting one
	Out        io.Writer
}

// readRec is one GET as the load driver saw it.
type readRec struct {
	id      int64
	start   time.Time
	latency time.Duration
	version int64
	tier    string
}

// writeRec is one acknowledged PUT: the version was committed before done.
type writeRec struct {
	id      int64
	version int64
	done    time.Time
	job     string
}

func runDemo(ctx context.Context, cfg demoConfig) (int, error) {
	out := cfg.Out
	dir, err := os.MkdirTemp("", "echocache-demo-")
	if err != nil {
		return 1, err
	}
	defer os.RemoveAll(dir)

	var procs []*proc
	defer func() {
		for _, p := range slices.Backward(procs) {
			p.stop(10 * time.Second)
		}
	}()
	valkeyAddr := cfg.Valkey
	if valkeyAddr == "" {
		v, err := startValkey(dir)
		if err != nil {
			return 1, err
		}
		procs = append(procs, v)
		valkeyAddr = v.addr
	}
	fmt.Fprintf(out, "valkey-server on %s\n", valkeyAddr)
	dbPath := filepath.Join(dir, "catalog.db")
	a, err := startInstance("A", dir, valkeyAddr, dbPath, cfg.Products)
	if err != nil {
		return 1, err
	}
	procs = append(procs, a)
	b, err := startInstance("B", dir, valkeyAddr, dbPath, cfg.Products)
	if err != nil {
		return 1, err
	}
	procs = append(procs, b)
	instances := []*proc{a, b}
	fmt.Fprintf(out, "instances A on %s and B on %s, catalog of %d products\n", a.addr, b.addr, cfg.Products)

	httpc := &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: cfg.Clients * 2, MaxConnsPerHost: cfg.Clients * 2},
	}
	var (
		mu        sync.Mutex
		reads     []readRec
		writes    []writeRec
		errCount  atomic.Int64
		reqs      atomic.Int64
		firstErrs []string
	)
	noteErr := func(err error) {
		errCount.Add(1)
		mu.Lock()
		if len(firstErrs) < 5 {
			firstErrs = append(firstErrs, err.Error())
		}
		mu.Unlock()
	}
	loadCtx, stopLoad := context.WithTimeout(ctx, cfg.Duration)
	defer stopLoad()
	start := time.Now()
	var killed atomic.Bool
	if cfg.KillAt > 0 {
		go func() {
			select {
			case <-time.After(cfg.KillAt):
				killed.Store(true)
				b.kill()
				fmt.Fprintf(out, "\nkilled instance B (SIGKILL) at %s\n", time.Since(start).Round(time.Millisecond))
			case <-loadCtx.Done():
			}
		}()
	}
	var wg sync.WaitGroup
	for g := range cfg.Clients {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), uint64(time.Now().UnixNano())))
			zipf := rand.NewZipf(r, cfg.ZipfS, 1, uint64(cfg.Products-1))
			var myReads []readRec
			var myWrites []writeRec
			for loadCtx.Err() == nil {
				inst := instances[r.IntN(len(instances))]
				if inst.dead.Load() {
					inst = a
				}
				id := int64(zipf.Uint64()) + 1
				reqs.Add(1)
				if r.Float64() < cfg.WriteRatio {
					w, err := put(loadCtx, httpc, inst.addr, id, r)
					if err != nil {
						if loadCtx.Err() == nil && !inst.dead.Load() {
							noteErr(err)
						}
						continue
					}
					myWrites = append(myWrites, w)
					continue
				}
				rec, err := get(loadCtx, httpc, inst.addr, id)
				if err != nil {
					if loadCtx.Err() == nil && !inst.dead.Load() {
						noteErr(err)
					}
					continue
				}
				myReads = append(myReads, rec)
			}
			mu.Lock()
			reads = append(reads, myReads...)
			writes = append(writes, myWrites...)
			mu.Unlock()
		})
	}
	progress := time.NewTicker(time.Second)
	// On a terminal the progress line rewrites itself; into a pipe or a log, each is a line.
	lineStart, lineEnd := "", "\n"
	if onTerminal(out) {
		lineStart, lineEnd = "\r", "   "
	}
	var last int64
	for loadCtx.Err() == nil {
		select {
		case <-progress.C:
			n := reqs.Load()
			fmt.Fprintf(out, "%s%5.1fs  %7d requests  %6d req/s  %d errors%s", lineStart, time.Since(start).Seconds(), n, n-last, errCount.Load(), lineEnd)
			last = n
		case <-loadCtx.Done():
		}
	}
	progress.Stop()
	wg.Wait()
	elapsed := time.Since(start)
	if lineStart != "" {
		fmt.Fprintln(out)
	}

	// Drain: every acknowledged PUT enqueued one re-index job; wait until each of those ran
	// (counted by id in the catalog: a job of a PUT whose reply was lost may have run too, and
	// must not stand in for an acknowledged one).
	jobs := len(writes)
	acked := make([]string, 0, jobs)
	for _, w := range writes {
		acked = append(acked, w.job)
	}
	catalog, err := openStore(ctx, dbPath, cfg.Products)
	if err != nil {
		return 1, fmt.Errorf("opening the catalog: %w", err)
	}
	defer catalog.Close()
	fmt.Fprintf(out, "waiting for %d re-index jobs to finish...\n", jobs)
	var st *instanceStats
	var ran int64
	drainDeadline := time.Now().Add(60 * time.Second)
	for {
		if ran, err = catalog.JobsRan(ctx, acked); err != nil {
			return 1, fmt.Errorf("counting the jobs that ran: %w", err)
		}
		if ran >= int64(jobs) || time.Now().After(drainDeadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if st, err = fetchStats(ctx, httpc, a.addr); err != nil {
		return 1, fmt.Errorf("stats of A: %w", err)
	}
	var stB *instanceStats
	if !b.dead.Load() {
		stB, _ = fetchStats(ctx, httpc, b.addr)
	}

	sum := summarize(cfg, reads, writes, start, elapsed)
	sum.errors = errCount.Load()
	sum.jobsEnqueued = int64(jobs)
	sum.jobsDone, sum.jobsDuplicate, sum.jobsReclaimed = ran, st.JobsDuplicate, st.JobsReclaimed
	sum.killed = killed.Load()
	sum.stats = []*instanceStats{st, stB}
	sum.print(out)
	for _, e := range firstErrs {
		fmt.Fprintf(out, "  error: %s\n", e)
	}
	if sum.stale > 0 || sum.jobsDone < sum.jobsEnqueued || sum.errors > 0 {
		return 1, nil
	}
	return 0, nil
}

func get(ctx context.Context, c *http.Client, addr string, id int64) (readRec, error) {
	start := time.Now()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/products/"+strconv.FormatInt(id, 10), nil)
	resp, err := c.Do(req)
	if err != nil {
		return readRec{}, err
	}
	defer resp.Body.Close()
	var p Product
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return readRec{}, fmt.Errorf("GET %d: %s: %s", id, resp.Status, bytes.TrimSpace(body))
	}
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
		return readRec{}, err
	}
	return readRec{id: id, start: start, latency: time.Since(start), version: p.Version, tier: resp.Header.Get("X-Cache-Tier")}, nil
}

func put(ctx context.Context, c *http.Client, addr string, id int64, r *rand.Rand) (writeRec, error) {
	body, _ := json.Marshal(map[string]any{"name": fmt.Sprintf("renamed product %d/%d", id, r.IntN(1_000_000)), "price_cents": 100 + r.IntN(100_000)})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPut, "http://"+addr+"/products/"+strconv.FormatInt(id, 10), bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return writeRec{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return writeRec{}, fmt.Errorf("PUT %d: %s: %s", id, resp.Status, bytes.TrimSpace(b))
	}
	var pr putReply
	if err := json.NewDecoder(resp.Body).Decode(&pr); err != nil {
		return writeRec{}, err
	}
	return writeRec{id: id, version: pr.Product.Version, done: time.Now(), job: pr.Job}, nil
}

func fetchStats(ctx context.Context, c *http.Client, addr string) (*instanceStats, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/stats", nil)
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var st instanceStats
	return &st, json.NewDecoder(resp.Body).Decode(&st)
}

// onTerminal reports whether w is a terminal (a character device), where a line may be
// rewritten in place.
func onTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
