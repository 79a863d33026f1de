package bus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/echocache/echocache/internal/jsonfmt"
	"github.com/echocache/echocache/keys"
)

// A task is a job whose payload names its kind: the envelope. A job row has exactly three
// fields (state, attempts, payload), so the kind cannot have a field of its own; it travels
// at the head of the payload instead of being the queue, so that one queue (one wake list,
// one blocking connection, one ordered backlog) can carry many kinds, as River's and asynq's
// queues do, and a worker claims across kinds in mint order.
//
// The envelope is the kind's name (1 to 64 bytes of [A-Za-z0-9_.-], the grammar of names),
// one NUL byte, then the encoded args:
//
//	email.send\x00{"to":"ada"}
//
// A client in another language writes and reads the same bytes. NUL cannot appear in a
// kind, nor unescaped in JSON or any text payload, so a payload enqueued without an envelope
// is never mistaken for one. An optional header block may precede the kind (the trace
// context, for one): see [WithHeaders].

// Errors of the worker runtime and its handlers.
var (
	// ErrNoEnvelope: a claimed payload does not start with a kind and a NUL byte. Such a job
	// can never be routed: the worker sends it to dead at once.
	ErrNoEnvelope = errors.New("bus: payload is not a task envelope")
	// ErrUnknownKind: no handler is registered for the task's kind in this worker. The job
	// is failed with the usual backoff (another deployment may know the kind), and goes to
	// dead when its attempts run out.
	ErrUnknownKind = errors.New("bus: no handler for the task's kind")
	// ErrSkipRetry: returned (or wrapped, see [SkipRetry]) by a handler, it sends the job to
	// dead at once instead of retrying it.
	ErrSkipRetry = errors.New("bus: skip retries")
	// ErrLeaseLost is the cause (context.Cause) of a handler's context cancelled because a
	// heartbeat found its lease lost: the job was reaped and may already run elsewhere.
	ErrLeaseLost = errors.New("bus: lease lost")
	// ErrJobTimeout is the cause of a handler's context cancelled because the handler ran
	// longer than its timeout ([HandlerOpts.Timeout]).
	ErrJobTimeout = errors.New("bus: job timeout")
	// ErrWorkerClosed is the cause of a handler's context cancelled because
	// [Worker.Close]'s deadline passed; also returned by registrations and Start on a
	// worker that was closed.
	ErrWorkerClosed = errors.New("bus: worker closed")
)

// Envelope returns the payload of a task of kind with the given encoded args.
func Envelope(kind string, body []byte) ([]byte, error) {
	if err := keys.ValidateName(kind); err != nil {
		return nil, invalid("task kind", err)
	}
	out := make([]byte, 0, len(kind)+1+len(body))
	out = append(out, kind...)
	out = append(out, 0)
	return append(out, body...), nil
}

// ParseEnvelope splits a task's payload into its kind and its encoded args, past a header
// block when it has one ([EnvelopeHeaders]). It answers [ErrNoEnvelope] when the payload
// does not start with a valid kind and a NUL byte, or with a valid header block and then
// those.
func ParseEnvelope(payload []byte) (kind string, body []byte, err error) {
	start, n := envelopeKind(payload)
	if n == 0 {
		return "", nil, ErrNoEnvelope
	}
	return string(payload[start : start+n]), payload[start+n+1:], nil
}

// envelopeKindLen is the length of the kind at the head of payload, or 0 when the payload is
// not an envelope. It allocates nothing.
func envelopeKindLen(payload []byte) int {
	for i := 0; i < len(payload) && i <= keys.MaxNameLen; i++ {
		c := payload[i]
		if c == 0 {
			return i // 0 when the kind is empty
		}
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return 0
		}
	}
	return 0
}

// Codec turns a task's args into bytes and back. It must be safe for concurrent use.
type Codec interface {
	Marshal(v any) ([]byte, error)
	Unmarshal(data []byte, v any) error
}

// JSONCodec is the default [Codec]: the encoding/json format, byte for byte (struct tags,
// json.Marshaler and json.Unmarshaler included), written and read by a decoder several times
// as fast as encoding/json's that accepts what it accepts (but for a time.Time whose date and
// time are joined by W, which it reads as if joined by T); decode errors are worded by that
// library.
type JSONCodec struct{}

// Marshal encodes v as json.Marshal does.
func (JSONCodec) Marshal(v any) ([]byte, error) { return jsonfmt.Marshal(v) }

// Unmarshal decodes data as json.Unmarshal does.
func (JSONCodec) Unmarshal(data []byte, v any) error { return jsonfmt.Unmarshal(data, v) }

// EncodeTask returns the payload of a task of kind whose args are encoded by codec (nil:
// [JSONCodec]). Use it to build the [NewJob]s of [Bus.EnqueueBatch].
func EncodeTask(kind string, args any, codec Codec) ([]byte, error) {
	if codec == nil {
		codec = JSONCodec{}
	}
	body, err := codec.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("bus: encoding the args of kind %s: %w", kind, err)
	}
	return Envelope(kind, body)
}

// TaskOpts are the options of [EnqueueTask]; nil means defaults.
type TaskOpts struct {
	EnqueueOpts
	// Codec encodes the args. Default [JSONCodec]; the worker's handler must use the same.
	Codec Codec
}

// EnqueueTask enqueues one task of kind on queue: args encoded by the codec, in an envelope
// that a [Worker] routes to the kind's handler.
func EnqueueTask(ctx context.Context, b *Bus, queue, kind string, args any, opts *TaskOpts) (Enqueued, error) {
	var o TaskOpts
	if opts != nil {
		o = *opts
	}
	payload, err := EncodeTask(kind, args, o.Codec)
	if err != nil {
		return Enqueued{}, err
	}
	return b.Enqueue(ctx, queue, payload, &o.EnqueueOpts)
}

// Task is what a handler of kind receives: the decoded args and the claimed job.
type Task[T any] struct {
	Kind string
	Args T
	// Job is the claimed job. Job.Token is the attempt: 1 on the first claim. Job.Payload is
	// the whole envelope.
	Job Job
}

// HandlerOpts are a kind's options; nil means the worker's defaults.
type HandlerOpts struct {
	// MaxAttempts: a failed job goes to dead once its attempts (claims) reach it. Default:
	// WorkerConfig.MaxAttempts, else the queue's maximum, else the bus's. Reaping an expired
	// lease measures attempts against the queue's maximum, which knows no kinds.
	MaxAttempts int
	// Backoff is the delay before retry number attempt+1 after attempt failed. Default
	// WorkerConfig.Backoff, else [DefaultBackoff].
	Backoff func(attempt int64) time.Duration
	// Lease is what the heartbeat renews this kind's jobs to; it must be longer than
	// WorkerConfig.HeartbeatInterval when that is set. Default WorkerConfig.Lease.
	Lease time.Duration
	// Timeout caps a handler's total runtime, heartbeats or not: its context reports the
	// deadline (ctx.Deadline) and is cancelled when it passes (cause [ErrJobTimeout]; ctx.Err
	// is context.Canceled), and its lease is no longer renewed. One timer of the worker serves
	// every handler's timeout. Default WorkerConfig.JobTimeout; negative: none.
	Timeout time.Duration
	// Codec decodes the args. Default WorkerConfig.Codec, else [JSONCodec].
	Codec Codec
	// Middleware wraps this kind's handler, the first outermost, inside the worker's
	// (WorkerConfig.Middleware). Default none.
	Middleware []Middleware
	// ResultTTL, when > 0, lets the kind's handlers keep a result: what a handler passes to
	// [SetResult] before it returns nil is kept this long after the job is retired (whole
	// milliseconds, rounded up), readable by [Bus.Lookup]. Such a job is completed by a
	// complete of its own rather than in the round trip's batch (completemany or
	// completeclaim, which keep no results). Default 0: no results, and [SetResult] answers
	// ErrInvalid.
	ResultTTL time.Duration
}

// withDefaults is o with every zero field set to the worker's, cfg with its defaults.
func (o HandlerOpts) withDefaults(cfg WorkerConfig) HandlerOpts {
	o.MaxAttempts = cmp.Or(o.MaxAttempts, cfg.MaxAttempts)
	if o.Backoff == nil {
		o.Backoff = cfg.Backoff
	}
	o.Lease = cmp.Or(o.Lease, cfg.Lease)
	o.Timeout = cmp.Or(o.Timeout, cfg.JobTimeout) // negative: none
	if o.Codec == nil {
		o.Codec = cfg.Codec
	}
	return o
}

// validate refuses the options, with their defaults, of the handler of kind in a worker of
// cfg.
func (o HandlerOpts) validate(kind string, cfg WorkerConfig) error {
	if o.MaxAttempts < 0 || o.Lease < 0 || o.ResultTTL < 0 {
		return fmt.Errorf("%w: handler of kind %s: negative MaxAttempts, Lease or ResultTTL", ErrInvalid, kind)
	}
	if cfg.HeartbeatInterval > 0 && cfg.HeartbeatInterval >= o.Lease {
		return fmt.Errorf("%w: handler of kind %s: Lease %v is not longer than the worker's HeartbeatInterval %v: leases would run out between heartbeats", ErrInvalid, kind, o.Lease, cfg.HeartbeatInterval)
	}
	for i, m := range o.Middleware {
		if m == nil {
			return fmt.Errorf("%w: handler of kind %s: Middleware[%d] is nil", ErrInvalid, kind, i)
		}
	}
	return nil
}

// Handle registers fn as the handler of kind: its args are decoded into T by the kind's
// codec. A job whose args do not decode goes to dead at once. Register every kind before
// [Worker.Start]; a kind may be registered once.
func Handle[T any](w *Worker, kind string, fn func(context.Context, *Task[T]) error, opts *HandlerOpts) error {
	if fn == nil {
		return fmt.Errorf("%w: handler of kind %s: nil function", ErrInvalid, kind)
	}
	return w.register(kind, opts, func(h *handler) handlerFunc {
		codec := h.codec
		return func(ctx context.Context, j Job, body []byte) error {
			t, err := decodeTask[T](codec, h.kind, j, body)
			if err != nil {
				return err
			}
			return fn(ctx, t)
		}
	})
}

// MustHandle is [Handle] that panics on error, for registrations fixed in code.
func MustHandle[T any](w *Worker, kind string, fn func(context.Context, *Task[T]) error, opts *HandlerOpts) {
	if err := Handle(w, kind, fn, opts); err != nil {
		panic(err)
	}
}

// HandleRaw registers fn as the handler of kind with the args as they were enqueued: no codec
// runs, Task.Args is the bytes after the envelope's NUL.
func HandleRaw(w *Worker, kind string, fn func(context.Context, *Task[[]byte]) error, opts *HandlerOpts) error {
	if fn == nil {
		return fmt.Errorf("%w: handler of kind %s: nil function", ErrInvalid, kind)
	}
	return w.register(kind, opts, func(h *handler) handlerFunc {
		return func(ctx context.Context, j Job, body []byte) error {
			return fn(ctx, &Task[[]byte]{Kind: h.kind, Args: body, Job: j})
		}
	})
}

// SkipRetry wraps err so that the worker sends the job to dead at once instead of retrying
// it. errors.Is(SkipRetry(err), ErrSkipRetry) and errors.Is(SkipRetry(err), err) hold.
func SkipRetry(err error) error {
	if err == nil {
		err = errors.New("no reason given")
	}
	return &skipRetryError{err}
}

type skipRetryError struct{ err error }

func (e *skipRetryError) Error() string        { return "bus: skip retries: " + e.err.Error() }
func (e *skipRetryError) Unwrap() error        { return e.err }
func (e *skipRetryError) Is(target error) bool { return target == ErrSkipRetry }

// SnoozeError, returned by a handler (see [Snooze]), hands the job back without counting a
// failure: it runs again after Delay. attempts still grows with the next claim, since it is
// the fencing token (see [Bus.Snooze]).
type SnoozeError struct {
	Delay time.Duration
}

// Error says how long the job sleeps.
func (e *SnoozeError) Error() string { return fmt.Sprintf("bus: snoozed for %v", e.Delay) }

// Snooze returns the error that snoozes the job for d (0: back to pending at once; negative
// counts as 0).
func Snooze(d time.Duration) error { return &SnoozeError{Delay: max(d, 0)} }

// Defaults of the retry backoff.
const (
	// DefaultBackoffBase is the delay after the first failure; each later one doubles it.
	DefaultBackoffBase = time.Second
	// DefaultMaxBackoff caps the delay.
	DefaultMaxBackoff = time.Hour
)

// DefaultBackoff is the default retry delay after attempt (1 on the first claim) failed:
// exponential, min(1 s × 2^(attempt−1), 1 h), with equal jitter: a uniform random point in
// the upper half, so that jobs that failed together do not retry together.
func DefaultBackoff(attempt int64) time.Duration {
	d := DefaultMaxBackoff
	if attempt < 1 {
		attempt = 1
	}
	if attempt <= 13 { // 1 s << 12 already passes the cap; larger shifts would overflow
		d = min(DefaultBackoffBase<<(attempt-1), DefaultMaxBackoff)
	}
	half := d / 2
	return half + rand.N(half+1)
}
