package bus_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
)

const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func TestEnvelopeHeaders(t *testing.T) {
	t.Parallel()
	plain, err := bus.Envelope("email.send", []byte(`{"to":"ada"}`))
	require.NoError(t, err)
	hs := []bus.Header{{Name: "traceparent", Value: traceparent}, {Name: "tracestate", Value: "rojo=00f067aa0ba902b7"}, {Name: "empty", Value: ""}}
	withH, err := bus.WithHeaders(plain, hs...)
	require.NoError(t, err)
	require.Equal(t, "\x00traceparent:"+traceparent+"\ntracestate:rojo=00f067aa0ba902b7\nempty:\n\nemail.send\x00{\"to\":\"ada\"}", string(withH))

	kind, body, err := bus.ParseEnvelope(withH)
	require.NoError(t, err)
	require.Equal(t, "email.send", kind)
	require.Equal(t, `{"to":"ada"}`, string(body))
	got, err := bus.EnvelopeHeaders(withH)
	require.NoError(t, err)
	require.Equal(t, hs, got)
	v, ok := bus.HeaderValue(withH, "traceparent")
	require.True(t, ok)
	require.Equal(t, traceparent, v)
	_, ok = bus.HeaderValue(withH, "baggage")
	require.False(t, ok)

	// A plain envelope reads as before and has no headers.
	got, err = bus.EnvelopeHeaders(plain)
	require.NoError(t, err)
	require.Nil(t, got)
	// Replacing the block, and removing it.
	again, err := bus.WithHeaders(withH, bus.Header{Name: "x", Value: "1"})
	require.NoError(t, err)
	require.Equal(t, "\x00x:1\n\nemail.send\x00{\"to\":\"ada\"}", string(again))
	back, err := bus.WithHeaders(again)
	require.NoError(t, err)
	require.Equal(t, plain, back)

	// Refused headers.
	for name, h := range map[string][]bus.Header{
		"upper-case name": {{Name: "Trace", Value: "x"}},
		"empty name":      {{Name: "", Value: "x"}},
		"colon in name":   {{Name: "a:b", Value: "x"}},
		"newline value":   {{Name: "a", Value: "x\ny"}},
		"control value":   {{Name: "a", Value: "x\x00"}},
		"long value":      {{Name: "a", Value: strings.Repeat("v", bus.MaxHeaderValue+1)}},
		"twice":           {{Name: "a", Value: "1"}, {Name: "a", Value: "2"}},
	} {
		_, err := bus.WithHeaders(plain, h...)
		require.ErrorIs(t, err, bus.ErrInvalid, name)
	}
	_, err = bus.WithHeaders([]byte("not an envelope"), hs...)
	require.ErrorIs(t, err, bus.ErrNoEnvelope)
	many := make([]bus.Header, bus.MaxHeaders+1)
	for i := range many {
		many[i] = bus.Header{Name: "h" + strings.Repeat("x", i%60) + string(rune('a'+i%26)), Value: "v"}
	}
	_, err = bus.WithHeaders(plain, many...)
	require.ErrorIs(t, err, bus.ErrInvalid)

	// Malformed blocks are no envelope.
	for _, p := range []string{
		"\x00", "\x00\n", "\x00a:1\n", "\x00a:1\nk\x00", "\x00A:1\n\nk\x00", "\x00a1\n\nk\x00", "\x00a:\x01\n\nk\x00",
		"\x00:1\n\nk\x00", "\x00a:1\n\n\x00x", "\x00a:1\nb:2\na:3\n\nk\x00", // a name twice
	} {
		_, _, err := bus.ParseEnvelope([]byte(p))
		require.ErrorIs(t, err, bus.ErrNoEnvelope, "%q", p)
		_, err = bus.EnvelopeHeaders([]byte(p))
		require.ErrorIs(t, err, bus.ErrNoEnvelope, "%q", p)
	}
	// The smallest valid one.
	kind, body, err = bus.ParseEnvelope([]byte("\x00\nk\x00"))
	require.NoError(t, err)
	require.Equal(t, "k", kind)
	require.Empty(t, body)
}

// TestWorkerRoutesHeaderedTask: a worker routes a task with a header block to its kind's
// handler, which gets the args alone; middleware reads the headers from Job.Payload.
func TestWorkerRoutesHeaderedTask(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Shared(t)
	b, err := bus.New(srv.Client(t), bus.Config{})
	require.NoError(t, err)
	queue := valkeytest.TestName(t)
	seen := make(chan string, 1)
	var gotArgs string
	mw := func(next bus.Handler) bus.Handler {
		return func(ctx context.Context, c *bus.Call) error {
			v, _ := bus.HeaderValue(c.Job.Payload, "traceparent")
			seen <- v
			return next(ctx, c)
		}
	}
	w, err := bus.NewWorker(b, bus.WorkerConfig{Queue: queue, Middleware: []bus.Middleware{mw}})
	require.NoError(t, err)
	done := make(chan struct{})
	require.NoError(t, bus.HandleRaw(w, "trace.me", func(_ context.Context, task *bus.Task[[]byte]) error {
		gotArgs = string(task.Args)
		close(done)
		return nil
	}, nil))
	require.NoError(t, w.Start())
	defer w.Close(context.Background())

	plain, err := bus.Envelope("trace.me", []byte("args"))
	require.NoError(t, err)
	payload, err := bus.WithHeaders(plain, bus.Header{Name: "traceparent", Value: traceparent})
	require.NoError(t, err)
	_, err = b.Enqueue(context.Background(), queue, payload, nil)
	require.NoError(t, err)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the headered task was not handled")
	}
	require.Equal(t, traceparent, <-seen)
	require.Equal(t, "args", gotArgs)
}

// FuzzEnvelopeHeaders: whatever the bytes, a payload whose headers read back is rebuilt byte
// for byte by WithHeaders from its plain envelope and those headers, and ParseEnvelope
// agrees with EnvelopeHeaders on what is an envelope.
func FuzzEnvelopeHeaders(f *testing.F) {
	f.Add([]byte("\x00traceparent:" + traceparent + "\n\nk\x00{}"))
	f.Add([]byte("\x00a:\nb:c\n\nkind.x\x00args"))
	f.Add([]byte("email.send\x00{}"))
	f.Add([]byte("\x00\n\x00"))
	f.Add([]byte("\x00a:1\na:2\n\nk\x00")) // a name twice: no envelope
	f.Fuzz(func(t *testing.T, payload []byte) {
		hs, err := bus.EnvelopeHeaders(payload)
		kind, body, perr := bus.ParseEnvelope(payload)
		require.Equal(t, err == nil, perr == nil)
		if err != nil {
			return
		}
		plain, err := bus.Envelope(kind, body)
		require.NoError(t, err)
		if hs == nil {
			require.Equal(t, plain, payload)
			return
		}
		again, err := bus.WithHeaders(plain, hs...)
		if len(hs) > 0 {
			require.NoError(t, err, "headers that read back are headers WithHeaders writes")
			require.Equal(t, payload, again)
		}
	})
}
