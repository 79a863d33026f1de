// Command jobs runs a producer and a pool of consumers on one EchoMQ queue and exits when
// every job is done.
//
//	VALKEY_ADDR=127.0.0.1:6379 go run ./examples/jobs -jobs 20
//
// The producer enqueues a batch of typed tasks, a few delayed ones, and one task twice under
// the same idempotency key (the second enqueue adds nothing). Each consumer is a bus.Worker:
// it claims as many jobs as it has free slots, waits on the queue's wake list (and the
// schedule's earliest run-at) when there is nothing to claim, keeps its leases alive with one
// batched extend per heartbeat, reaps and promotes the queue, retries "flaky" tasks once with
// a backoff, and completes the rest; each completion is announced on a broadcast topic, which
// the main goroutine counts. The program exits 0 when every job was completed, 1 on error or
// after -timeout.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/keys"
)

func main() {
	var cfg config
	flag.StringVar(&cfg.queue, "queue", "example-jobs", "queue name (also the topic name)")
	flag.IntVar(&cfg.jobs, "jobs", 20, "how many distinct jobs to enqueue")
	flag.IntVar(&cfg.workers, "workers", 3, "how many workers (4 handlers each)")
	flag.DurationVar(&cfg.timeout, "timeout", 30*time.Second, "give up after this long")
	flag.Parse()
	cfg.addr = os.Getenv("VALKEY_ADDR")
	if cfg.addr == "" {
		cfg.addr = "127.0.0.1:6379"
	}
	if err := run(cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "jobs:", err)
		os.Exit(1)
	}
}

type config struct {
	addr, queue   string
	jobs, workers int
	timeout       time.Duration
}

func run(cfg config, out io.Writer) error {
	if cfg.jobs < 2 || cfg.workers < 1 {
		return errors.New("need -jobs >= 2 and -workers >= 1")
	}
	if _, err := keys.NewQueue(cfg.queue); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()
	client, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{cfg.addr}, DisableCache: true})
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", cfg.addr, err)
	}
	defer client.Close()
	b, err := bus.New(client, bus.Config{Lease: 2 * time.Second})
	if err != nil {
		return err
	}

	// Count completions as the consumers announce them on the topic.
	var completed atomic.Int64
	allDone := make(chan struct{})
	var doneOnce sync.Once
	sub, err := b.Subscribe(ctx, []string{cfg.queue}, func(e bus.Event) {
		switch e.Kind {
		case bus.Message:
			if completed.Add(1) == int64(cfg.jobs) {
				doneOnce.Do(func() { close(allDone) })
			}
		case bus.Subscribed, bus.Disconnected, bus.Overflow:
			fmt.Fprintf(out, "topic %s: %s\n", cfg.queue, e.Kind)
		}
	})
	if err != nil {
		return err
	}
	defer sub.Close()

	if err := produce(ctx, b, cfg, out); err != nil {
		return err
	}

	// Consumers: one worker each, 4 handlers at a time. Completions are announced on the
	// topic by a publisher goroutine, since event hooks run on the worker's loop and must not
	// block.
	var retried atomic.Int64
	announce := make(chan string, cfg.jobs)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		for id := range announce {
			if _, err := b.Publish(ctx, cfg.queue, []byte(id)); err != nil && ctx.Err() == nil {
				select {
				case errs <- err:
				default:
				}
			}
		}
	})
	workers := make([]*bus.Worker, cfg.workers)
	for i := range workers {
		w, err := bus.NewWorker(b, bus.WorkerConfig{
			Queue:       cfg.queue,
			Concurrency: 4,
			Backoff:     func(int64) time.Duration { return 50 * time.Millisecond },
			Logger:      slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelError})),
			OnEvent: func(e bus.JobEvent) {
				switch e.Type {
				case bus.JobCompleted:
					announce <- e.Job.ID.String() // capacity cfg.jobs: never blocks
				case bus.JobRetried:
					retried.Add(1)
				}
			},
		})
		if err != nil {
			return err
		}
		bus.MustHandle(w, "example.work", handleWork, nil)
		if err := w.Start(); err != nil {
			return err
		}
		workers[i] = w
	}

	var result error
	select {
	case <-allDone:
	case err := <-errs:
		result = err
	case <-ctx.Done():
		result = fmt.Errorf("after %v: %d of %d jobs completed", cfg.timeout, completed.Load(), cfg.jobs)
	}
	for _, w := range workers {
		cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := w.Close(cctx); err != nil && result == nil {
			result = err
		}
		ccancel()
	}
	close(announce)
	wg.Wait()
	if result != nil {
		return result
	}
	counts, err := b.Counts(context.Background(), cfg.queue)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "completed %d jobs, %d after a retry; left: pending %d, active %d, scheduled %d, dead %d\n",
		completed.Load(), retried.Load(), counts.Pending, counts.Active, counts.Scheduled, counts.Dead)
	return nil
}

// produce is the producer: cfg.jobs typed tasks, JSON-encoded in an envelope that names their
// kind, the second half of them delayed by 200 ms, the last one enqueued twice under one
// idempotency key (the second enqueue adds nothing).
func produce(ctx context.Context, b *bus.Bus, cfg config, out io.Writer) error {
	batch := make([]bus.NewJob, cfg.jobs-1)
	for i := range batch {
		p, err := bus.EncodeTask("example.work", work{N: i, Flaky: i%4 == 1}, nil)
		if err != nil {
			return err
		}
		batch[i] = bus.NewJob{Payload: p}
	}
	delayed := batch[len(batch)/2:]
	if _, err := b.EnqueueBatch(ctx, cfg.queue, batch[:len(batch)/2], nil); err != nil {
		return err
	}
	if _, err := b.EnqueueBatch(ctx, cfg.queue, delayed, &bus.EnqueueOpts{Delay: 200 * time.Millisecond}); err != nil {
		return err
	}
	// One key per run, so that a second run against the same server is not a duplicate.
	once := &bus.TaskOpts{EnqueueOpts: bus.EnqueueOpts{UniqueKey: "report-" + strconv.FormatInt(time.Now().UnixNano(), 36)}}
	first, err := bus.EnqueueTask(ctx, b, cfg.queue, "example.work", work{N: -1}, once)
	if err != nil {
		return err
	}
	dup, err := bus.EnqueueTask(ctx, b, cfg.queue, "example.work", work{N: -1}, once)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "enqueued %d jobs (%d delayed); the second enqueue of key %q returned %s, duplicate=%v\n",
		cfg.jobs, len(delayed), once.UniqueKey, dup.ID, dup.Duplicate && dup.ID == first.ID)
	return nil
}

// handleWork is the handler of kind example.work: a flaky task fails its first attempt.
func handleWork(ctx context.Context, t *bus.Task[work]) error {
	time.Sleep(5 * time.Millisecond) // the work
	if t.Args.Flaky && t.Job.Token == 1 {
		return errors.New("flaky: fails on its first attempt")
	}
	return nil
}

// work is the example's task args.
type work struct {
	N     int  `json:"n"`
	Flaky bool `json:"flaky,omitempty"`
}
