package echootel_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/echocache/echocache/bus"
	echootel "github.com/echocache/echocache/contrib/otel"
	"github.com/echocache/echocache/echotest"
	"github.com/echocache/echocache/keys"
)

// TestMiddlewareOutcomeAsWorker: the consumer span and the run histogram read a handler's
// result as the worker does: a panic with a Snooze error fails the job (an error span), and
// a bus.RateLimited hands it back, no failure (no error status).
func TestMiddlewareOutcomeAsWorker(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	reader := sdkmetric.NewManualReader()
	tel, err := echootel.New(echootel.Config{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)),
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	require.NoError(t, err)
	cfg := bus.WorkerConfig{Middleware: []bus.Middleware{tel.Middleware()}}
	ctx := context.Background()

	panicky := echotest.NewWorker(t, cfg, "panicky", func(context.Context, *bus.Task[int]) error {
		panic(bus.Snooze(time.Minute))
	}, nil)
	require.Equal(t, echotest.Failed, panicky.Work(ctx, t, 1, nil).Outcome)
	limited := echotest.NewWorker(t, cfg, "limited", func(context.Context, *bus.Task[int]) error {
		return bus.RateLimited(time.Minute)
	}, nil)
	require.Equal(t, echotest.RateLimited, limited.Work(ctx, t, 1, nil).Outcome)

	spans := exp.GetSpans()
	require.Len(t, spans, 2)
	require.Contains(t, spans[0].Attributes, attribute.String("echomq.job.outcome", "failed"), "a panic fails the job")
	require.Equal(t, codes.Error, spans[0].Status.Code)
	require.Contains(t, spans[1].Attributes, attribute.String("echomq.job.outcome", "rate_limited"))
	require.Equal(t, codes.Unset, spans[1].Status.Code, "a rate-limited job is handed back, not failed")

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	outcomes := map[string]string{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "echomq.job.run.duration" {
				continue
			}
			for _, p := range m.Data.(metricdata.Histogram[float64]).DataPoints {
				kind, _ := p.Attributes.Value("echomq.job.kind")
				outcome, _ := p.Attributes.Value("echomq.job.outcome")
				outcomes[kind.AsString()] = outcome.AsString()
			}
		}
	}
	require.Equal(t, map[string]string{"panicky": "failed", "limited": "rate_limited"}, outcomes)
}

// TestMiddlewareExtractsWholeContext: with a propagator that carries baggage as well as the
// trace context, what Inject wrote in the envelope's headers reaches the handler's context
// whole: the producer's baggage with the span.
func TestMiddlewareExtractsWholeContext(t *testing.T) {
	t.Parallel()
	prop := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	tp := sdktrace.NewTracerProvider()
	tel, err := echootel.New(echootel.Config{TracerProvider: tp, Propagator: prop})
	require.NoError(t, err)

	member, err := baggage.NewMember("tenant", "acme")
	require.NoError(t, err)
	bag, err := baggage.New(member)
	require.NoError(t, err)
	ctx, span := tp.Tracer("shop").Start(baggage.ContextWithBaggage(context.Background(), bag), "checkout")
	defer span.End()
	plain, err := bus.EncodeTask("email.send", 1, nil)
	require.NoError(t, err)
	payload, err := tel.Inject(ctx, plain)
	require.NoError(t, err)
	v, ok := bus.HeaderValue(payload, "baggage")
	require.True(t, ok, "Inject wrote the baggage")
	require.Equal(t, "tenant=acme", v)

	var got string
	h := bus.Chain(func(ctx context.Context, _ *bus.Call) error {
		got = baggage.FromContext(ctx).Member("tenant").Value()
		return nil
	}, tel.Middleware())
	job := bus.Job{Queue: "q", ID: keys.NewJobID(), Token: 1, Payload: payload}
	require.NoError(t, h(context.Background(), &bus.Call{Queue: "q", Kind: "email.send", Job: job}))
	require.Equal(t, "acme", got, "the handler's context carries the producer's baggage")
}

// TestMiddlewareHandedBackOnClose: a handler that Close's deadline cancelled (cause
// bus.ErrWorkerClosed) and that then returns its error is handed back by the worker, not
// failed: its span records no error and its outcome is handed_back.
func TestMiddlewareHandedBackOnClose(t *testing.T) {
	t.Parallel()
	srv := echotest.Valkey(t)
	b := srv.Bus(t, nil)
	queue := echotest.Name(t)
	exp := tracetest.NewInMemoryExporter()
	tel, err := echootel.New(echootel.Config{TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))})
	require.NoError(t, err)
	events := make(chan bus.JobEventType, 4)
	w, err := bus.NewWorker(b, bus.WorkerConfig{Queue: queue, StatsInterval: -1, HousekeepInterval: -1,
		Logger: slog.New(slog.DiscardHandler), Middleware: []bus.Middleware{tel.Middleware()},
		OnEvent: func(e bus.JobEvent) {
			if e.Type != bus.JobClaimed && e.Type != bus.JobExtended {
				events <- e.Type
			}
		}})
	require.NoError(t, err)
	started := make(chan struct{}, 1)
	require.NoError(t, bus.Handle(w, "long", func(ctx context.Context, _ *bus.Task[int]) error {
		started <- struct{}{}
		<-ctx.Done()
		return context.Cause(ctx)
	}, nil))
	require.NoError(t, w.Start())
	_, err = bus.EnqueueTask(context.Background(), b, queue, "long", 0, nil)
	require.NoError(t, err)
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler never started")
	}
	cctx, cancel := context.WithCancel(context.Background())
	cancel() // Close's deadline has passed: the handler is cancelled at once
	require.ErrorIs(t, w.Close(cctx), context.Canceled)
	require.Equal(t, bus.JobHandedBack, <-events, "the worker hands the job back")
	spans := exp.GetSpans()
	require.Len(t, spans, 1)
	require.Contains(t, spans[0].Attributes, attribute.String("echomq.job.outcome", "handed_back"))
	require.Equal(t, codes.Unset, spans[0].Status.Code, "a job handed back is no failure")
}
