package bus_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

func TestEnvelope(t *testing.T) {
	t.Parallel()
	p, err := bus.Envelope("email.send", []byte(`{"to":"ada"}`))
	require.NoError(t, err)
	require.Equal(t, "email.send\x00{\"to\":\"ada\"}", string(p))
	kind, body, err := bus.ParseEnvelope(p)
	require.NoError(t, err)
	require.Equal(t, "email.send", kind)
	require.Equal(t, `{"to":"ada"}`, string(body))

	for _, tc := range []struct{ name, payload string }{
		{"json", `{"to":"ada"}`},
		{"empty", ""},
		{"no nul", "email.send"},
		{"empty kind", "\x00body"},
		{"bad byte", "email send\x00body"},
		{"kind too long", strings.Repeat("k", 65) + "\x00body"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := bus.ParseEnvelope([]byte(tc.payload))
			require.ErrorIs(t, err, bus.ErrNoEnvelope)
		})
	}
	_, err = bus.Envelope("bad kind", nil)
	require.ErrorIs(t, err, bus.ErrInvalid)
	_, err = bus.Envelope(strings.Repeat("k", 65), nil)
	require.ErrorIs(t, err, keys.ErrInvalid)
	_, _, err = bus.ParseEnvelope([]byte(strings.Repeat("k", 64) + "\x00"))
	require.NoError(t, err, "a kind of 64 bytes is a name")
}

func TestDefaultBackoff(t *testing.T) {
	t.Parallel()
	for attempt, want := range map[int64]time.Duration{1: time.Second, 2: 2 * time.Second, 5: 16 * time.Second, 12: 2048 * time.Second, 13: time.Hour, 1000: time.Hour} {
		for range 50 {
			d := bus.DefaultBackoff(attempt)
			require.GreaterOrEqual(t, d, want/2, "attempt %d", attempt)
			require.LessOrEqual(t, d, want, "attempt %d", attempt)
		}
	}
}

func TestWorkerConfigErrors(t *testing.T) {
	t.Parallel()
	b := newBus(t, valkeytest.Shared(t).Client(t), bus.Config{})
	_, err := bus.NewWorker(nil, bus.WorkerConfig{Queue: "q"})
	require.ErrorIs(t, err, bus.ErrInvalid)
	_, err = bus.NewWorker(b, bus.WorkerConfig{Queue: "bad queue"})
	require.ErrorIs(t, err, keys.ErrInvalid)
	_, err = bus.NewWorker(b, bus.WorkerConfig{Queue: "q", Concurrency: -1})
	require.ErrorIs(t, err, bus.ErrInvalid)

	w, err := bus.NewWorker(b, bus.WorkerConfig{Queue: valkeytest.TestName(t)})
	require.NoError(t, err)
	require.ErrorIs(t, w.Start(), bus.ErrInvalid, "no handler")
	noop := func(context.Context, *bus.Task[args]) error { return nil }
	require.NoError(t, bus.Handle(w, "a", noop, nil))
	require.ErrorIs(t, bus.Handle(w, "a", noop, nil), bus.ErrInvalid, "twice")
	require.ErrorIs(t, bus.Handle(w, "b c", noop, nil), keys.ErrInvalid)
	require.ErrorIs(t, bus.Handle[args](w, "b", nil, nil), bus.ErrInvalid)
	require.NoError(t, w.Start())
	require.ErrorIs(t, bus.Handle(w, "late", noop, nil), bus.ErrInvalid, "after Start")
	require.ErrorIs(t, w.Start(), bus.ErrInvalid, "twice")
	require.NoError(t, w.Close(context.Background()))
	require.NoError(t, w.Close(context.Background()), "twice")
	require.ErrorIs(t, w.Start(), bus.ErrWorkerClosed)

	never, err := bus.NewWorker(b, bus.WorkerConfig{Queue: valkeytest.TestName(t)})
	require.NoError(t, err)
	require.NoError(t, never.Close(context.Background()), "never started")
}

// TestWorkerHeartbeatShorterThanLease: a heartbeat interval that is not shorter than the
// lease it renews (the worker's, the bus's it defaults to, or a kind's) is refused, naming
// the fields; a shorter one, or the default, is accepted.
func TestWorkerHeartbeatShorterThanLease(t *testing.T) {
	t.Parallel()
	b := newBus(t, valkeytest.Shared(t).Client(t), bus.Config{Lease: 10 * time.Second})
	name := valkeytest.TestName(t)
	for _, tc := range []struct {
		name string
		cfg  bus.WorkerConfig
	}{
		{"equal", bus.WorkerConfig{Queue: name, Lease: time.Second, HeartbeatInterval: time.Second}},
		{"longer", bus.WorkerConfig{Queue: name, Lease: time.Second, HeartbeatInterval: time.Minute}},
		{"the bus's lease", bus.WorkerConfig{Queue: name, HeartbeatInterval: 10 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := bus.NewWorker(b, tc.cfg)
			require.ErrorIs(t, err, bus.ErrInvalid)
			require.ErrorContains(t, err, "HeartbeatInterval")
			require.ErrorContains(t, err, "Lease")
		})
	}

	w, err := bus.NewWorker(b, bus.WorkerConfig{Queue: name, Lease: time.Second, HeartbeatInterval: 300 * time.Millisecond})
	require.NoError(t, err)
	noop := func(context.Context, *bus.Task[args]) error { return nil }
	err = bus.Handle(w, "short", noop, &bus.HandlerOpts{Lease: 300 * time.Millisecond})
	require.ErrorIs(t, err, bus.ErrInvalid, "a kind's lease no longer than the heartbeat")
	require.ErrorContains(t, err, "HeartbeatInterval")
	require.ErrorContains(t, err, "short")
	require.NoError(t, bus.Handle(w, "long", noop, &bus.HandlerOpts{Lease: time.Minute}))
	require.NoError(t, bus.Handle(w, "default", noop, nil), "the worker's lease")

	w, err = bus.NewWorker(b, bus.WorkerConfig{Queue: name, Lease: time.Second})
	require.NoError(t, err)
	require.NoError(t, bus.Handle(w, "short", noop, &bus.HandlerOpts{Lease: 30 * time.Millisecond}), "the default heartbeat follows the shortest lease")
}

// TestConfigNamesTheField: a negative field of a Config or a WorkerConfig is refused with
// its name.
func TestConfigNamesTheField(t *testing.T) {
	t.Parallel()
	c := valkeytest.Shared(t).Client(t)
	_, err := bus.New(c, bus.Config{UniqueTTL: -time.Second})
	require.ErrorIs(t, err, bus.ErrInvalid)
	require.ErrorContains(t, err, "UniqueTTL")
	b, err := bus.New(c, bus.Config{MaxAttempts: -1, PromoteLimit: -1})
	require.NoError(t, err, "negative MaxAttempts and PromoteLimit mean none")
	_, err = bus.NewWorker(b, bus.WorkerConfig{Queue: "q", WakeTimeout: -time.Second})
	require.ErrorIs(t, err, bus.ErrInvalid)
	require.ErrorContains(t, err, "WakeTimeout")
	_, err = bus.NewWorker(b, bus.WorkerConfig{Queue: "q", JobTimeout: -1, HousekeepInterval: -1})
	require.NoError(t, err, "negative JobTimeout and HousekeepInterval mean none")
}
