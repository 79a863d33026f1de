// Command jobs runs a producer and a pool of consumers on one EchoMQ queue and exits when
// every job is done.
//
//	VALKEY_ADDR=127.0.0.1:6379 go run ./examples/jobs -jobs 20
//
// The producer enqueues a batch, a few delayed jobs, and one job twice under the same
// idempotency key (the second enqueue adds nothing). Consumers claim several jobs at a time,
// wait on the queue's wake list when there is nothing to claim, keep their leases alive with
// a batched extend, fail "flaky" jobs once with a backoff, and complete the rest; each
// completion is announced on a broadcast topic, which the main goroutine counts. A
// housekeeper reaps expired leases and promotes due jobs. The program exits 0 when every job
// was completed, 1 on error or after -timeout.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
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
	flag.IntVar(&cfg.workers, "workers", 3, "how many consumer goroutines")
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
	q, err := keys.NewQueue(cfg.queue)
	if err != nil {
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

	// Producer.
	var dup bus.Enqueued
	{
		batch := make([]bus.NewJob, cfg.jobs-1)
		for i := range batch {
			kind := "plain"
			if i%4 == 1 {
				kind = "flaky"
			}
			batch[i] = bus.NewJob{Payload: fmt.Appendf(nil, "%s job %d", kind, i)}
		}
		delayed := batch[len(batch)/2:]
		if _, err := b.EnqueueBatch(ctx, cfg.queue, batch[:len(batch)/2], nil); err != nil {
			return err
		}
		if _, err := b.EnqueueBatch(ctx, cfg.queue, delayed, &bus.EnqueueOpts{Delay: 200 * time.Millisecond}); err != nil {
			return err
		}
		// One key per run, so that a second run against the same server is not a duplicate.
		once := &bus.EnqueueOpts{UniqueKey: "report-" + strconv.FormatInt(time.Now().UnixNano(), 36)}
		first, err := b.Enqueue(ctx, cfg.queue, []byte("plain report"), once)
		if err != nil {
			return err
		}
		if dup, err = b.Enqueue(ctx, cfg.queue, []byte("plain report"), once); err != nil {
			return err
		}
		fmt.Fprintf(out, "enqueued %d jobs (%d delayed); the second enqueue of key %q returned %s, duplicate=%v\n",
			cfg.jobs, len(delayed), once.UniqueKey, dup.ID, dup.Duplicate && dup.ID == first.ID)
	}

	// Consumers and the housekeeper.
	var retried atomic.Int64
	errs := make(chan error, cfg.workers+1)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range cfg.workers {
		wg.Go(func() { errs <- consume(ctx, b, client, q, w, stop, &retried) })
	}
	wg.Go(func() { errs <- housekeep(ctx, b, cfg.queue, stop) })

	var result error
	select {
	case <-allDone:
	case err := <-errs:
		result = err
	case <-ctx.Done():
		result = fmt.Errorf("after %v: %d of %d jobs completed", cfg.timeout, completed.Load(), cfg.jobs)
	}
	close(stop)
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

// consume claims and works jobs until stop: up to 4 at a time, waiting on the wake list
// when the queue is empty, with a heartbeat that extends every held lease in one call.
func consume(ctx context.Context, b *bus.Bus, client valkey.Client, q keys.Queue, worker int, stop <-chan struct{}, retried *atomic.Int64) error {
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		jobs, err := b.Claim(ctx, q.Name(), &bus.ClaimOpts{Count: 4})
		if err != nil {
			return stopped(ctx, stop, err)
		}
		if len(jobs) == 0 {
			// Nothing to claim: block on the wake list; the timeout covers scheduled jobs.
			err := client.Do(ctx, client.B().Blpop().Key(q.Wake()).Timeout(0.1).Build()).Error()
			if err != nil && !valkey.IsValkeyNil(err) {
				return stopped(ctx, stop, err)
			}
			continue
		}
		// Heartbeat: one batched extend for all held jobs while they are worked.
		beat, beatDone := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(beatDone)
			t := time.NewTicker(500 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-beat:
					return
				case <-t.C:
					if _, lost, err := b.ExtendMany(ctx, jobs, nil); err == nil && len(lost) > 0 {
						fmt.Printf("worker %d lost %d leases\n", worker, len(lost))
					}
				}
			}
		}()
		for _, j := range jobs {
			time.Sleep(5 * time.Millisecond) // the work
			if strings.HasPrefix(string(j.Payload), "flaky") && j.Token == 1 {
				if _, err := b.Fail(ctx, j, &bus.FailOpts{Backoff: 50 * time.Millisecond}); err != nil {
					return stopped(ctx, stop, err)
				}
				retried.Add(1)
				continue
			}
			if err := b.Complete(ctx, j, nil); errors.Is(err, bus.ErrStale) {
				continue // the lease was lost: another worker owns the job now
			} else if err != nil {
				return stopped(ctx, stop, err)
			}
			if _, err := b.Publish(ctx, q.Name(), []byte(j.ID.String())); err != nil {
				return stopped(ctx, stop, err)
			}
		}
		close(beat)
		<-beatDone
	}
}

// housekeep reaps expired leases and promotes due jobs until stop.
func housekeep(ctx context.Context, b *bus.Bus, queue string, stop <-chan struct{}) error {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return nil
		case <-t.C:
		}
		if _, err := b.Reap(ctx, queue, nil); err != nil {
			return stopped(ctx, stop, err)
		}
		if _, err := b.Promote(ctx, queue, nil); err != nil {
			return stopped(ctx, stop, err)
		}
	}
}

// stopped hides the errors of calls cut short by the end of the run.
func stopped(ctx context.Context, stop <-chan struct{}, err error) error {
	select {
	case <-stop:
		return nil
	default:
	}
	if ctx.Err() != nil {
		return nil
	}
	return err
}
