package bus

import (
	"cmp"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
	"github.com/echocache/echocache/topic"
)

// Defaults of [Config] and of the per-call options.
const (
	// DefaultMaxPayload is the largest payload, in bytes, that a job or a message may carry.
	DefaultMaxPayload = 512 << 10
	// DefaultMaxAttempts is how many claims a job gets before fail or reap sends it to dead,
	// when neither the call nor the queue (see [Bus.SetMaxAttempts]) says otherwise.
	DefaultMaxAttempts = 25
	// DefaultLease is the lease a claim or an extend takes when the call names none.
	DefaultLease = 30 * time.Second
	// DefaultPromoteLimit is how many due scheduled jobs a claim promotes before it claims.
	DefaultPromoteLimit = 100
	// DefaultUniqueTTL is how long an idempotency key keeps answering its first job's id.
	DefaultUniqueTTL = 24 * time.Hour
	// DefaultLimit bounds one call of promote, reap, purge and browse.
	DefaultLimit = 100
	// DefaultSubscribeBuffer is how many events a subscription queues for its handler before
	// it reports an overflow.
	DefaultSubscribeBuffer = topic.DefaultSubscribeBuffer
	// DefaultAckTimeout is how long a Replicated or Persisted write waits for its
	// acknowledgements.
	DefaultAckTimeout = time.Second
)

// MaxBatch is the most jobs one call of [Bus.EnqueueBatch], [Bus.Claim] (ClaimOpts.Count),
// [Bus.CompleteMany], [Bus.ExtendMany], [Bus.RetryDead] or [Bus.PurgeDead] takes, and the largest Limit of
// [Bus.Promote], [Bus.Reap], [Bus.PurgeDead] and [Bus.Browse]. Each such call is one script
// (or one read), and the server runs it alone: 10,000 jobs hold it for tens of milliseconds,
// while a call of a million would stall every other client of the server (the caches reading
// rows included) for seconds. Split larger batches; each call is all or nothing on its own.
const MaxBatch = 10_000

// Config configures a [Bus]. The zero Config is valid: every zero field means its default.
type Config struct {
	// MaxPayload is the largest payload in bytes; larger ones are refused before anything is
	// written. Default 512 KiB ([DefaultMaxPayload]).
	MaxPayload int
	// MaxAttempts is the maximum of claims per job when neither the call nor the queue's
	// meta names one. Default 25 ([DefaultMaxAttempts]); a negative value means no maximum.
	MaxAttempts int
	// Lease is the lease of a claim or extend that names none. Default 30 s ([DefaultLease]).
	Lease time.Duration
	// PromoteLimit is how many due scheduled jobs a claim promotes first. Default 100
	// ([DefaultPromoteLimit]); a negative value turns promote-on-claim off.
	PromoteLimit int
	// UniqueTTL is how long an idempotency key answers its first job's id. Default 24 h
	// ([DefaultUniqueTTL]).
	UniqueTTL time.Duration
	// SubscribeBuffer is how many events a subscription queues for its handler before it
	// drops messages and reports an [Overflow]. Default 1024 ([DefaultSubscribeBuffer]).
	SubscribeBuffer int
}

// withDefaults is c with every zero field set to its default, a negative MaxAttempts (no
// maximum) or PromoteLimit (no promote on claim) turned into the scripts' 0, and the counts
// the scripts take bounded by [lua.MaxUint] (math.MaxInt, a natural "unlimited", is then
// what the scripts can read: 10^15 attempts is no maximum in practice).
func (c Config) withDefaults() Config {
	c.MaxPayload = min(cmp.Or(c.MaxPayload, DefaultMaxPayload), lua.MaxUint)
	c.MaxAttempts = scriptCount(cmp.Or(c.MaxAttempts, DefaultMaxAttempts))
	c.Lease = cmp.Or(c.Lease, DefaultLease)
	c.PromoteLimit = scriptCount(cmp.Or(c.PromoteLimit, DefaultPromoteLimit))
	c.UniqueTTL = cmp.Or(c.UniqueTTL, DefaultUniqueTTL)
	c.SubscribeBuffer = cmp.Or(c.SubscribeBuffer, DefaultSubscribeBuffer)
	return c
}

// scriptCount is n as a count the scripts take: 0 for a negative n, at most [lua.MaxUint].
func scriptCount(n int) int { return min(max(n, 0), lua.MaxUint) }

// validate refuses what no default mends; it runs on c.withDefaults().
func (c Config) validate() error {
	return notNegative("bus.New",
		field{"MaxPayload", int64(c.MaxPayload)}, field{"Lease", int64(c.Lease)},
		field{"UniqueTTL", int64(c.UniqueTTL)}, field{"SubscribeBuffer", int64(c.SubscribeBuffer)})
}

// field is a config field's name and value, for notNegative.
type field struct {
	name  string
	value int64
}

// negativeOpt answers ErrInvalid naming the option and its value when d is negative.
func negativeOpt(op, queue, name string, d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("%w: %s in queue %s: %s %v must not be negative", ErrInvalid, op, queue, name, d)
	}
	return nil
}

// notNegative answers ErrInvalid naming the first negative field.
func notNegative(where string, fields ...field) error {
	for _, f := range fields {
		if f.value < 0 {
			return fmt.Errorf("%w: %s: %s must not be negative", ErrInvalid, where, f.name)
		}
	}
	return nil
}

// Bus is EchoMQ over one valkey-go client: the queue verbs, inspection and broadcast topics.
// It holds no goroutines and needs no closing; it is safe for concurrent use. Queues are
// named by strings and need no declaration: a queue exists while one of its keys does. The
// first successful write of a Bus to a queue also adds the queue to the registry, which
// [Bus.Queues] lists, empty queues included.
type Bus struct {
	client valkey.Client
	cfg    Config
	topics *topic.Topics // Publish and the subscriptions

	mu     sync.RWMutex
	queues map[string]keys.Queue // names validated once; bounded by maxCachedQueues

	resent atomic.Int64 // scripts sent again after the cluster refused them (execMulti)
	loaded lua.Loaded   // where the scripts are known loaded, for the waits of acknowledged writes (execOnce)
	reg    registry     // the queues this Bus added to the registry (registry.go)

	flow      sync.Map     // queue names last seen keeping lane state: claimed by laneclaim
	flowCount atomic.Int64 // entries of flow, bounded by maxCachedQueues
}

// maxCachedQueues bounds the cache of validated queue names, so that a process fed endless
// distinct names does not grow without bound; past it, names are validated on every call.
const maxCachedQueues = 4096

// New returns a Bus over client. Build the client with DisableCache: true unless it is also
// used for client-side caching; the bus does not use it.
func New(client valkey.Client, cfg Config) (*Bus, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: bus.New: nil client", ErrInvalid)
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	topics, err := topic.New(client, topic.Config{MaxPayload: cfg.MaxPayload, SubscribeBuffer: cfg.SubscribeBuffer})
	if err != nil {
		return nil, fromTopic(err)
	}
	return &Bus{client: client, cfg: cfg, topics: topics, queues: map[string]keys.Queue{}}, nil
}

// Client is the valkey client the Bus runs on, for tools and tests that read the keyspace
// directly, with the key builders of package keys (package echotest reads a queue's sets
// so).
func (b *Bus) Client() valkey.Client { return b.client }

// queue validates name once and returns its key builder.
func (b *Bus) queue(op, name string) (keys.Queue, error) {
	b.mu.RLock()
	q, ok := b.queues[name]
	b.mu.RUnlock()
	if ok {
		return q, nil
	}
	q, err := keys.NewQueue(name)
	if err != nil {
		return keys.Queue{}, invalid(op, err)
	}
	b.mu.Lock()
	if len(b.queues) < maxCachedQueues {
		b.queues[name] = q
	}
	b.mu.Unlock()
	return q, nil
}

// msCeil is the duration d in whole milliseconds, rounded up: a positive lease, delay or
// timeout never becomes 0 (which the scripts read as "none" or refuse) and is never shorter
// than asked. Instants go the other way: an EnqueueOpts.At is sent as its UnixMilli,
// rounded down, so a run-at is never later than asked.
func msCeil(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	ms := int64(d / time.Millisecond) // d + time.Millisecond - 1 would overflow near the int64 limit
	if d%time.Millisecond != 0 {
		ms++
	}
	return ms
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
