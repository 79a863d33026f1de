package echootel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/echocache/echocache/bus"
	echootel "github.com/echocache/echocache/contrib/otel"
	"github.com/echocache/echocache/echotest"
)

// The producer process: the test binary run again with these variables set.
const (
	envProducer = "ECHOOTEL_TEST_PRODUCER"
	envAddr     = "ECHOOTEL_TEST_ADDR"
	envQueue    = "ECHOOTEL_TEST_QUEUE"
)

func TestMain(m *testing.M) {
	if os.Getenv(envProducer) != "" {
		if err := produce(); err != nil {
			fmt.Fprintln(os.Stderr, "producer:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	echotest.Main(m)
}

// produced is what the producer process reports on stdout: its spans as its exporter got
// them, and the job.
type produced struct {
	JobID string       `json:"job_id"`
	Spans []spanReport `json:"spans"`
}

type spanReport struct {
	Name, TraceID, SpanID, ParentID, Kind string
	Attrs                                 map[string]string
}

// produce enqueues one task inside a "checkout" span, with its own tracer provider and
// in-memory exporter, and prints what it exported.
func produce() error {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tel, err := echootel.New(echootel.Config{TracerProvider: tp})
	if err != nil {
		return err
	}
	client, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{os.Getenv(envAddr)}, DisableCache: true})
	if err != nil {
		return err
	}
	defer client.Close()
	b, err := bus.New(client, bus.Config{})
	if err != nil {
		return err
	}
	ctx, root := tp.Tracer("shop").Start(context.Background(), "checkout")
	e, err := tel.EnqueueTask(ctx, b, os.Getenv(envQueue), "email.send", map[string]string{"to": "ada"}, nil)
	root.End()
	if err != nil {
		return err
	}
	out := produced{JobID: e.ID.String()}
	for _, s := range exp.GetSpans() {
		out.Spans = append(out.Spans, report(s))
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}

func report(s tracetest.SpanStub) spanReport {
	r := spanReport{Name: s.Name, TraceID: s.SpanContext.TraceID().String(), SpanID: s.SpanContext.SpanID().String(),
		Kind: s.SpanKind.String(), Attrs: map[string]string{}}
	if s.Parent.IsValid() {
		r.ParentID = s.Parent.SpanID().String()
	}
	for _, a := range s.Attributes {
		r.Attrs[string(a.Key)] = a.Value.String()
	}
	return r
}

// TestTraceAcrossProcesses: a producer in another process enqueues a task in its span; the
// worker here runs it in a consumer span of the same trace, the child of the producer's
// span and linked to it, with the messaging attributes.
func TestTraceAcrossProcesses(t *testing.T) {
	t.Parallel()
	srv := echotest.Valkey(t)
	queue := echotest.Name(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tel, err := echootel.New(echootel.Config{TracerProvider: tp})
	require.NoError(t, err)
	w := startWorker(t, srv, queue, tel)
	handled := make(chan trace.SpanContext, 1)
	require.NoError(t, bus.Handle(w, "email.send", func(ctx context.Context, task *bus.Task[map[string]string]) error {
		if task.Args["to"] != "ada" {
			return errors.New("wrong args")
		}
		handled <- trace.SpanContextFromContext(ctx)
		return nil
	}, nil))
	require.NoError(t, w.Start())

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envProducer+"=1", envAddr+"="+srv.Addr, envQueue+"="+queue)
	out, err := cmd.Output()
	require.NoError(t, err, "the producer process failed")
	var p produced
	require.NoError(t, json.Unmarshal(out, &p), string(out))
	require.Len(t, p.Spans, 2, "the producer exported send and checkout")
	send, checkout := p.Spans[0], p.Spans[1]
	require.Equal(t, "send "+queue, send.Name)
	require.Equal(t, "producer", send.Kind)
	require.Equal(t, checkout.SpanID, send.ParentID)
	require.Equal(t, map[string]string{
		"messaging.system": "echomq", "messaging.destination.name": queue, "messaging.operation.name": "send",
		"messaging.operation.type": "send", "messaging.message.id": p.JobID, "echomq.job.kind": "email.send",
		"messaging.message.body.size": send.Attrs["messaging.message.body.size"],
	}, send.Attrs)

	var inHandler trace.SpanContext
	select {
	case inHandler = <-handled:
	case <-time.After(10 * time.Second):
		t.Fatal("the task was not handled")
	}
	var spans tracetest.SpanStubs
	echotestEventually(t, "the consumer span ended", func() bool { spans = exp.GetSpans(); return len(spans) == 1 })
	c := spans[0]
	require.Equal(t, "process "+queue, c.Name)
	require.Equal(t, trace.SpanKindConsumer, c.SpanKind)
	require.Equal(t, send.TraceID, c.SpanContext.TraceID().String(), "one trace across the two processes")
	require.Equal(t, send.SpanID, c.Parent.SpanID().String(), "the consumer span is the producer span's child")
	require.True(t, c.Parent.IsRemote())
	require.Len(t, c.Links, 1)
	require.Equal(t, send.SpanID, c.Links[0].SpanContext.SpanID().String(), "and linked to it")
	require.Equal(t, c.SpanContext.SpanID(), inHandler.SpanID(), "the handler runs in the consumer span")
	attrs := map[string]string{}
	for _, a := range c.Attributes {
		attrs[string(a.Key)] = a.Value.String()
	}
	require.Equal(t, map[string]string{
		"messaging.system": "echomq", "messaging.destination.name": queue, "messaging.operation.name": "process",
		"messaging.operation.type": "process", "messaging.message.id": p.JobID, "echomq.job.kind": "email.send",
		"echomq.job.attempt": "1", "echomq.job.outcome": "completed",
		"messaging.message.body.size": send.Attrs["messaging.message.body.size"],
	}, attrs)
	require.Equal(t, codes.Unset, c.Status.Code)
}

// TestConsumerSpanWithoutContext: a job enqueued without a trace context runs in a new root
// span, and a failing handler marks it an error.
func TestConsumerSpanWithoutContext(t *testing.T) {
	t.Parallel()
	srv := echotest.Valkey(t)
	queue := echotest.Name(t)
	exp := tracetest.NewInMemoryExporter()
	tel, err := echootel.New(echootel.Config{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))})
	require.NoError(t, err)
	w := startWorker(t, srv, queue, tel)
	require.NoError(t, bus.Handle(w, "boom", func(context.Context, *bus.Task[int]) error {
		return bus.SkipRetry(errors.New("boom"))
	}, nil))
	require.NoError(t, w.Start())
	b := srv.Bus(t, nil)
	_, err = bus.EnqueueTask(context.Background(), b, queue, "boom", 1, nil)
	require.NoError(t, err)
	var spans tracetest.SpanStubs
	echotestEventually(t, "the consumer span ended", func() bool { spans = exp.GetSpans(); return len(spans) == 1 })
	require.False(t, spans[0].Parent.IsValid())
	require.Empty(t, spans[0].Links)
	require.Equal(t, codes.Error, spans[0].Status.Code)
	require.Contains(t, spans[0].Attributes, attribute.String("echomq.job.outcome", "failed"))

	// Inject without a span leaves a payload as it was.
	plain, err := bus.Envelope("k", []byte("x"))
	require.NoError(t, err)
	same, err := tel.Inject(context.Background(), plain)
	require.NoError(t, err)
	require.Equal(t, plain, same)
	_, err = tel.Inject(context.Background(), []byte("raw"))
	require.ErrorIs(t, err, bus.ErrNoEnvelope)
}

func startWorker(t *testing.T, srv *echotest.Server, queue string, tel *echootel.Telemetry) *bus.Worker {
	t.Helper()
	// Heartbeats every 100 ms, so a cancel reaches a running handler at once.
	w, err := bus.NewWorker(srv.Bus(t, nil), bus.WorkerConfig{Queue: queue, StatsInterval: 50 * time.Millisecond,
		Lease: 2 * time.Second, HeartbeatInterval: 100 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler), Middleware: []bus.Middleware{tel.Middleware()}})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = w.Close(ctx)
	})
	return w
}

func echotestEventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
