// Command periodic runs two periodic schedules of an exchange's back office on one EchoMQ
// queue: an end-of-day report at 22:00 New York time on weekdays, and a reconciliation every
// five minutes. Start it in as many processes as you like: there is no leader, each tick runs
// once, and a process that dies takes nothing with it.
//
//	VALKEY_ADDR=127.0.0.1:6379 go run ./examples/periodic -process a &
//	VALKEY_ADDR=127.0.0.1:6379 go run ./examples/periodic -process b
//
// Every process declares the same schedules (declaring is idempotent), runs a bus.Scheduler
// that fires due ticks through one script per tick (the tick is the fence: a tick already
// fired by another process enqueues nothing), and a bus.Worker that runs the jobs. Each job
// prints one line naming its schedule, its tick (the job id carries it) and the process that
// ran it. -every shortens the reconciliation period to watch several ticks; -for stops the
// process after a while (0: run until interrupted).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/bus"
)

func main() {
	var cfg config
	flag.StringVar(&cfg.queue, "queue", "back-office", "queue name")
	flag.StringVar(&cfg.process, "process", "main", "this process's name, printed beside each job it runs")
	flag.DurationVar(&cfg.every, "every", 5*time.Minute, "the reconciliation's period (at least 100ms)")
	flag.DurationVar(&cfg.runFor, "for", 0, "stop after this long; 0 runs until SIGINT or SIGTERM")
	flag.Parse()
	cfg.addr = os.Getenv("VALKEY_ADDR")
	if cfg.addr == "" {
		cfg.addr = "127.0.0.1:6379"
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "periodic:", err)
		os.Exit(1)
	}
}

type config struct {
	addr, queue, process string
	every, runFor        time.Duration
}

// reportArgs are the end-of-day report's args: which desk's books to close.
type reportArgs struct {
	Desk string `json:"desk"`
}

func run(ctx context.Context, cfg config, out io.Writer) error {
	client, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{cfg.addr}, DisableCache: true})
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", cfg.addr, err)
	}
	defer client.Close()
	b, err := bus.New(client, bus.Config{})
	if err != nil {
		return err
	}
	schedules := []bus.Periodic{
		{Name: "eod-report", Cron: "0 22 * * 1-5", Zone: "America/New_York", Kind: "eod-report", Args: reportArgs{Desk: "fx"}},
		{Name: "reconcile", Every: cfg.every, Kind: "reconcile", Missed: bus.MissedCatchUp},
	}
	for _, p := range schedules {
		if err := b.DeclarePeriodic(ctx, cfg.queue, p); err != nil {
			return err
		}
	}
	list, err := b.ListPeriodic(ctx, cfg.queue)
	if err != nil {
		return err
	}
	for _, p := range list {
		fmt.Fprintf(out, "schedule %s: next tick %s\n", p.Name, p.Next.UTC().Format(time.RFC3339Nano))
	}

	var mu sync.Mutex // one line at a time
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, format, args...)
	}
	w, err := bus.NewWorker(b, bus.WorkerConfig{Queue: cfg.queue, Logger: quiet()})
	if err != nil {
		return err
	}
	bus.MustHandle(w, "reconcile", func(_ context.Context, t *bus.Task[struct{}]) error {
		say("ran reconcile tick %s in %s\n", t.Job.ID.Time().UTC().Format(time.RFC3339Nano), cfg.process)
		return nil
	}, nil)
	bus.MustHandle(w, "eod-report", func(_ context.Context, t *bus.Task[reportArgs]) error {
		say("ran eod-report for desk %s, tick %s, in %s\n", t.Args.Desk, t.Job.ID.Time().UTC().Format(time.RFC3339), cfg.process)
		return nil
	}, nil)
	s, err := bus.NewScheduler(b, bus.SchedulerConfig{Queue: cfg.queue, Handles: w.Handles, Logger: quiet()})
	if err != nil {
		return err
	}
	if err := w.Start(); err != nil {
		return err
	}
	if err := s.Start(); err != nil {
		return errors.Join(err, w.Close(context.Background()))
	}
	if cfg.runFor > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.runFor)
		defer cancel()
	}
	<-ctx.Done()
	shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = errors.Join(s.Close(shutdown), w.Close(shutdown))
	st := s.Stats()
	say("%s stopped: fired %d ticks, %d fenced (fired by another process first)\n", cfg.process, st.Fired, st.Fenced)
	return err
}

// quiet logs only errors: the job lines are the program's output.
func quiet() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}
