package echootel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/echocache/echocache/bus"
)

// ScopeName is the instrumentation scope of the tracer and the meter.
const ScopeName = "github.com/echocache/echocache/contrib/otel"

// System is the messaging.system attribute of every span.
const System = "echomq"

// Attribute keys of EchoMQ's own.
var (
	KindKey    = attribute.Key("echomq.job.kind")
	AttemptKey = attribute.Key("echomq.job.attempt")
	OutcomeKey = attribute.Key("echomq.job.outcome")
	StateKey   = attribute.Key("echomq.job.state")
	SetKey     = attribute.Key("echomq.queue.set")
	LaneKey    = attribute.Key("echomq.lane.state")
	TableKey   = attribute.Key("echocache.table")
	TierKey    = attribute.Key("echocache.tier")
)

// Config chooses the providers; a zero field means the default.
type Config struct {
	// TracerProvider makes the tracer. Default otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// MeterProvider makes the meter. Default otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
	// Propagator writes and reads the context in the envelope's headers. Default
	// propagation.TraceContext{} (traceparent, tracestate), the fields FORMAT envelope
	// documents. Its field names must be envelope header names ([a-z0-9-]).
	Propagator propagation.TextMapPropagator
}

func (c Config) withDefaults() Config {
	if c.TracerProvider == nil {
		c.TracerProvider = otel.GetTracerProvider()
	}
	if c.MeterProvider == nil {
		c.MeterProvider = otel.GetMeterProvider()
	}
	if c.Propagator == nil {
		c.Propagator = propagation.TraceContext{}
	}
	return c
}

// Telemetry traces producers and consumers and records the job histograms.
type Telemetry struct {
	tracer     trace.Tracer
	prop       propagation.TextMapPropagator
	run, wait  metric.Float64Histogram
	now        func() time.Time
	systemAttr attribute.KeyValue
}

// New returns the Telemetry of cfg.
func New(cfg Config) (*Telemetry, error) {
	cfg = cfg.withDefaults()
	meter := cfg.MeterProvider.Meter(ScopeName)
	run, err := meter.Float64Histogram("echomq.job.run.duration", metric.WithUnit("s"),
		metric.WithDescription("Handler run time, by outcome (completed, failed, snoozed, rate_limited, handed_back)."))
	if err != nil {
		return nil, fmt.Errorf("echootel: %w", err)
	}
	wait, err := meter.Float64Histogram("echomq.job.wait.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from a job's mint (carried by its id) to its first claim."))
	if err != nil {
		return nil, fmt.Errorf("echootel: %w", err)
	}
	return &Telemetry{tracer: cfg.TracerProvider.Tracer(ScopeName), prop: cfg.Propagator, run: run, wait: wait,
		now: time.Now, systemAttr: semconv.MessagingSystemKey.String(System)}, nil
}

// headerCarrier is a propagation.TextMapCarrier over envelope headers.
type headerCarrier []bus.Header

func (c *headerCarrier) Get(key string) string {
	for _, h := range *c {
		if h.Name == key {
			return h.Value
		}
	}
	return ""
}

func (c *headerCarrier) Set(key, value string) {
	for i, h := range *c {
		if h.Name == key {
			(*c)[i].Value = value
			return
		}
	}
	*c = append(*c, bus.Header{Name: key, Value: value})
}

func (c *headerCarrier) Keys() []string {
	out := make([]string, len(*c))
	for i, h := range *c {
		out[i] = h.Name
	}
	return out
}

// Inject returns the task envelope with ctx's trace context in its header block (headers it
// had are kept, the propagator's replaced). Without a valid span in ctx it returns the
// envelope unchanged.
func (t *Telemetry) Inject(ctx context.Context, envelope []byte) ([]byte, error) {
	hs, err := bus.EnvelopeHeaders(envelope)
	if err != nil {
		return nil, err
	}
	c := headerCarrier(hs)
	t.prop.Inject(ctx, &c)
	if len(c) == len(hs) && !trace.SpanContextFromContext(ctx).IsValid() {
		return envelope, nil
	}
	return bus.WithHeaders(envelope, c...)
}

// EnqueueTask is bus.EnqueueTask in a producer span ("send <queue>") whose context the job
// carries.
func (t *Telemetry) EnqueueTask(ctx context.Context, b *bus.Bus, queue, kind string, args any, opts *bus.TaskOpts) (bus.Enqueued, error) {
	var o bus.TaskOpts
	if opts != nil {
		o = *opts
	}
	ctx, span := t.tracer.Start(ctx, "send "+queue, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(t.systemAttr, semconv.MessagingDestinationName(queue),
			semconv.MessagingOperationName("send"), semconv.MessagingOperationTypeSend, KindKey.String(kind)))
	defer span.End()
	payload, err := bus.EncodeTask(kind, args, o.Codec)
	if err == nil {
		payload, err = t.Inject(ctx, payload)
	}
	var e bus.Enqueued
	if err == nil {
		span.SetAttributes(semconv.MessagingMessageBodySize(len(payload)))
		e, err = b.Enqueue(ctx, queue, payload, &o.EnqueueOpts)
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		return e, err
	}
	span.SetAttributes(semconv.MessagingMessageID(e.ID.String()))
	return e, nil
}

// Middleware runs each handler in a consumer span ("process <queue>"): the child of the
// producer's span carried in the job's headers, with a link to it; a new root span when the
// job carries none. The handler's error sets the span's status. It also records the job
// histograms.
func (t *Telemetry) Middleware() bus.Middleware {
	return func(next bus.Handler) bus.Handler {
		return func(ctx context.Context, c *bus.Call) error {
			start := t.now()
			hs, _ := bus.EnvelopeHeaders(c.Job.Payload)
			carrier := headerCarrier(hs)
			producer := trace.SpanContextFromContext(t.prop.Extract(context.Background(), &carrier))
			// The whole propagated context (baggage and whatever else the propagator carries)
			// reaches the handler, not the span context alone.
			ctx = t.prop.Extract(ctx, &carrier)
			opts := []trace.SpanStartOption{
				trace.WithSpanKind(trace.SpanKindConsumer),
				trace.WithAttributes(t.systemAttr, semconv.MessagingDestinationName(c.Queue),
					semconv.MessagingOperationName("process"), semconv.MessagingOperationTypeProcess,
					semconv.MessagingMessageID(c.Job.ID.String()), semconv.MessagingMessageBodySize(len(c.Job.Payload)),
					KindKey.String(c.Kind), AttemptKey.Int64(c.Job.Token)),
			}
			if producer.IsValid() {
				ctx = trace.ContextWithRemoteSpanContext(ctx, producer)
				opts = append(opts, trace.WithLinks(trace.Link{SpanContext: producer}))
			}
			ctx, span := t.tracer.Start(ctx, "process "+c.Queue, opts...)
			defer span.End()
			attrs := metric.WithAttributes(semconv.MessagingDestinationName(c.Queue), KindKey.String(c.Kind))
			if c.Job.Token == 1 {
				t.wait.Record(ctx, max(start.Sub(c.Job.ID.Time()), 0).Seconds(), attrs)
			}
			err := next(ctx, c)
			outcome := Outcome(err)
			if outcome == "failed" && errors.Is(context.Cause(ctx), bus.ErrWorkerClosed) {
				// Close's deadline cancelled the handler: the worker hands the job back
				// without counting a failure.
				outcome = "handed_back"
			}
			t.run.Record(ctx, t.now().Sub(start).Seconds(), attrs, metric.WithAttributes(OutcomeKey.String(outcome)))
			span.SetAttributes(OutcomeKey.String(outcome))
			if outcome == "failed" {
				span.RecordError(err)
				span.SetStatus(codes.Error, err.Error())
			}
			return err
		}
	}
}

// Outcome names a handler's result as the worker reads it: completed (nil), snoozed (a
// *bus.SnoozeError), rate_limited (a bus.RateLimited: handed back, no failure) or failed (any
// other error, and a panic whatever its value).
func Outcome(err error) string {
	if err == nil {
		return "completed"
	}
	if _, panicked := err.(*bus.PanicError); panicked {
		return "failed"
	}
	var snooze *bus.SnoozeError
	var limited *bus.RateLimitedError
	switch {
	case errors.As(err, &snooze):
		return "snoozed"
	case errors.As(err, &limited):
		return "rate_limited"
	}
	return "failed"
}
