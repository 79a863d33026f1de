// Command service is a product-catalog HTTP service that reads through EchoCache and runs its
// background work on EchoMQ, both on one Valkey, over a SQLite catalog as the source of truth.
//
//	service demo [-duration 30s] [-kill-at 10s]   start Valkey and two instances, drive a Zipf
//	                                             load, check every read, print a summary
//	service serve -listen ADDR -valkey ADDR -db FILE   run one instance
//
// `make demo` at the repository root runs the first.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch os.Args[1] {
	case "demo":
		fs := flag.NewFlagSet("demo", flag.ExitOnError)
		cfg := demoConfig{Out: os.Stdout}
		fs.DurationVar(&cfg.Duration, "duration", 30*time.Second, "how long the load runs, warm-up included")
		fs.DurationVar(&cfg.Warmup, "warmup", 10*time.Second, "the first part of the run, whose reads are checked but left out of the tier figures")
		fs.IntVar(&cfg.Clients, "clients", 16, "concurrent load clients")
		fs.Float64Var(&cfg.WriteRatio, "writes", 0.01, "share of requests that are writes")
		fs.IntVar(&cfg.Products, "products", 100_000, "catalog size, seeded on first start")
		fs.Float64Var(&cfg.ZipfS, "zipf", 1.3, "Zipf exponent of the reads (> 1)")
		fs.DurationVar(&cfg.Bound, "bound", time.Second, "staleness bound: a read may lag a write acknowledged less than this before it")
		fs.DurationVar(&cfg.KillAt, "kill-at", 0, "SIGKILL instance B this far into the run (0: never)")
		fs.StringVar(&cfg.Valkey, "valkey", "", "use this Valkey address instead of starting a throwaway server")
		_ = fs.Parse(os.Args[2:])
		if cfg.ZipfS <= 1 || cfg.Products < 2 || cfg.Clients < 1 || cfg.Duration <= 0 || cfg.Warmup < 0 || cfg.Warmup >= cfg.Duration {
			fmt.Fprintln(os.Stderr, "demo: -zipf must be > 1, -products >= 2, -clients >= 1, -duration > 0, 0 <= -warmup < -duration")
			os.Exit(2)
		}
		code, err := runDemo(ctx, cfg)
		if err != nil {
			fmt.Fprintln(os.Stderr, "demo:", err)
			code = 1
		}
		os.Exit(code)
	case "serve":
		fs := flag.NewFlagSet("serve", flag.ExitOnError)
		var cfg serveConfig
		fs.StringVar(&cfg.Listen, "listen", "127.0.0.1:8080", "HTTP listen address")
		fs.StringVar(&cfg.Valkey, "valkey", "127.0.0.1:6379", "Valkey address")
		fs.StringVar(&cfg.DB, "db", "catalog.db", "SQLite catalog file (created and seeded if missing)")
		fs.StringVar(&cfg.Name, "name", "A", "instance name, shown in /stats")
		fs.IntVar(&cfg.Products, "products", 100_000, "catalog size to seed on first start")
		fs.DurationVar(&cfg.IndexDelay, "index-delay", 40*time.Millisecond, "how long a re-index job's simulated search-engine call takes")
		_ = fs.Parse(os.Args[2:])
		if err := serve(ctx, cfg); err != nil {
			fmt.Fprintln(os.Stderr, "serve:", err)
			os.Exit(1)
		}
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: service demo [flags] | service serve [flags]   (-h for flags)")
	os.Exit(2)
}
