package echotest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/echotest"
)

// noop is a handler that does nothing.
func noop(context.Context, *bus.Task[email]) error { return nil }

// TestWorkerConfigRefusedAsBus: every WorkerConfig that bus.NewWorker refuses (on a bus of
// the default Config, whose Lease a Worker assumes) fails the test in echotest.NewWorker with
// the same error, and the edge configs bus.NewWorker accepts, echotest.NewWorker accepts too.
func TestWorkerConfigRefusedAsBus(t *testing.T) {
	t.Parallel()
	b := echotest.Valkey(t).Bus(t, nil)
	queue := echotest.Name(t)
	nilMW := []bus.Middleware{func(next bus.Handler) bus.Handler { return next }, nil}
	for _, tc := range []struct {
		name string
		cfg  bus.WorkerConfig
	}{
		{"negative Concurrency", bus.WorkerConfig{Concurrency: -1}},
		{"negative Lease", bus.WorkerConfig{Lease: -time.Second}},
		{"negative HeartbeatInterval", bus.WorkerConfig{HeartbeatInterval: -time.Second}},
		{"negative MaxAttempts", bus.WorkerConfig{MaxAttempts: -1}},
		{"negative WakeTimeout", bus.WorkerConfig{WakeTimeout: -time.Second}},
		{"negative HousekeepLimit", bus.WorkerConfig{HousekeepLimit: -1}},
		{"HousekeepLimit past the scripts' bound", bus.WorkerConfig{HousekeepLimit: 1_000_000_000_000_000}},
		{"Prefetch past MaxPrefetch", bus.WorkerConfig{Prefetch: bus.MaxPrefetch + 1}},
		{"unknown ClaimAck durability", bus.WorkerConfig{ClaimAck: bus.Ack{Durability: bus.Persisted + 1}}},
		{"negative ClaimAck replicas", bus.WorkerConfig{ClaimAck: bus.Ack{Durability: bus.Replicated, Replicas: -1}}},
		{"negative ClaimAck timeout", bus.WorkerConfig{ClaimAck: bus.Ack{Timeout: -time.Second}}},
		{"ID with a control byte", bus.WorkerConfig{ID: "worker\n1"}},
		{"ID too long", bus.WorkerConfig{ID: strings.Repeat("w", 513)}},
		{"StatsInterval too short", bus.WorkerConfig{StatsInterval: time.Millisecond}},
		{"StatsInterval too long", bus.WorkerConfig{StatsInterval: 9 * time.Hour}},
		{"HeartbeatInterval not shorter than Lease", bus.WorkerConfig{Lease: time.Second, HeartbeatInterval: time.Second}},
		{"HeartbeatInterval not shorter than the bus's Lease", bus.WorkerConfig{HeartbeatInterval: bus.DefaultLease}},
		{"nil middleware", bus.WorkerConfig{Middleware: nilMW}},
		{"malformed queue", bus.WorkerConfig{Queue: "mail{1}"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := tc.cfg
			if cfg.Queue == "" {
				cfg.Queue = queue
			}
			_, err := bus.NewWorker(b, cfg)
			require.ErrorIs(t, err, bus.ErrInvalid, "bus.NewWorker refuses it")
			msg := fails(t, func(tb testing.TB) { echotest.NewWorker(tb, cfg, "email.send", noop, nil) })
			require.Equal(t, "echotest: NewWorker: "+err.Error(), msg, "the error of bus.NewWorker")
		})
	}

	// Edge configs a worker accepts: a Concurrency past its bound counts as the bound; a
	// negative Prefetch, JobTimeout, HousekeepInterval or StatsInterval means none.
	for _, cfg := range []bus.WorkerConfig{
		{Concurrency: 1 << 40, Prefetch: -1, JobTimeout: -1, HousekeepInterval: -1, StatsInterval: -1},
		{Prefetch: bus.MaxPrefetch, Lease: time.Second, HeartbeatInterval: time.Second - time.Millisecond},
		{ClaimAck: bus.Ack{Durability: bus.Replicated, Replicas: 2, Timeout: time.Second}, ID: "worker-1"},
	} {
		cfg.Queue = queue
		_, err := bus.NewWorker(b, cfg)
		require.NoError(t, err)
		echotest.NewWorker(t, cfg, "email.send", noop, nil)
	}
}

// TestWorkerHandlerOptsRefusedAsBus: the HandlerOpts that bus.Handle refuses on a worker of
// cfg fail the test in echotest.NewWorker with the same error.
func TestWorkerHandlerOptsRefusedAsBus(t *testing.T) {
	t.Parallel()
	b := echotest.Valkey(t).Bus(t, nil)
	queue := echotest.Name(t)
	for _, tc := range []struct {
		name string
		cfg  bus.WorkerConfig
		opts bus.HandlerOpts
	}{
		{"negative MaxAttempts", bus.WorkerConfig{}, bus.HandlerOpts{MaxAttempts: -1}},
		{"negative Lease", bus.WorkerConfig{}, bus.HandlerOpts{Lease: -time.Second}},
		{"Lease not longer than HeartbeatInterval", bus.WorkerConfig{HeartbeatInterval: 10 * time.Second}, bus.HandlerOpts{Lease: 5 * time.Second}},
		{"nil middleware", bus.WorkerConfig{}, bus.HandlerOpts{Middleware: []bus.Middleware{nil}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := tc.cfg
			cfg.Queue = queue
			w, err := bus.NewWorker(b, cfg)
			require.NoError(t, err)
			err = bus.Handle(w, "email.send", noop, &tc.opts)
			require.ErrorIs(t, err, bus.ErrInvalid, "bus.Handle refuses it")
			msg := fails(t, func(tb testing.TB) { echotest.NewWorker(tb, cfg, "email.send", noop, &tc.opts) })
			require.Equal(t, "echotest: NewWorker: "+err.Error(), msg, "the error of bus.Handle")
		})
	}
}
