package bus

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"
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

// withDefaults is c with every zero field set to its default, and a negative MaxAttempts (no
// maximum) or PromoteLimit (no promote on claim) turned into the scripts' 0.
func (c Config) withDefaults() Config {
	c.MaxPayload = cmp.Or(c.MaxPayload, DefaultMaxPayload)
	c.MaxAttempts = max(cmp.Or(c.MaxAttempts, DefaultMaxAttempts), 0)
	c.Lease = cmp.Or(c.Lease, DefaultLease)
	c.PromoteLimit = max(cmp.Or(c.PromoteLimit, DefaultPromoteLimit), 0)
	c.UniqueTTL = cmp.Or(c.UniqueTTL, DefaultUniqueTTL)
	c.SubscribeBuffer = cmp.Or(c.SubscribeBuffer, DefaultSubscribeBuffer)
	return c
}

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
// named by strings and need no declaration: a queue exists while one of its keys does.
type Bus struct {
	client valkey.Client
	cfg    Config
	topics *topic.Topics // Publish and the subscriptions

	mu     sync.RWMutex
	queues map[string]keys.Queue // names validated once; bounded by maxCachedQueues

	resent atomic.Int64 // scripts sent again after the cluster refused them (execMulti)
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

// The scripts the bus runs, looked up once. Each one's KEYS come from its header (keysOf).
var (
	scEnqueue      = lua.Get("enqueue")
	scClaim        = lua.Get("claim")
	scComplete     = lua.Get("complete")
	scCompleteMany = lua.Get("completemany")
	scFail         = lua.Get("fail")
	scExtend       = lua.Get("extend")
	scSnooze       = lua.Get("snooze")
	scPromote      = lua.Get("promote")
	scReap         = lua.Get("reap")
	scPause        = lua.Get("pause")
	scResume       = lua.Get("resume")
	scConfigure    = lua.Get("configure")
	scCancel       = lua.Get("cancel")
	scRetry        = lua.Get("retry")
	scPurge        = lua.Get("purge")
	scCounts       = lua.Get("counts")
	scLookup       = lua.Get("lookup")
	scDue          = lua.Get("due")
)

// scriptKeys is each bus script's KEYS, in header order, read from the headers themselves, so
// the Go side cannot drift from the protocol.
var scriptKeys = headerKeys(scEnqueue, scClaim, scComplete, scCompleteMany, scFail, scExtend, scSnooze,
	scPromote, scReap, scPause, scResume, scConfigure, scCancel, scRetry, scPurge, scCounts, scLookup, scDue)

// headerKeys parses the grammar form of each script's declared KEYS (emq:{<q>}:pending) into
// its type. The bundle is compiled in, so a header that does not parse is a bug and panics.
func headerKeys(scripts ...*lua.Script) map[*lua.Script][]keys.Type {
	out := make(map[*lua.Script][]keys.Type, len(scripts))
	for _, s := range scripts {
		types := make([]keys.Type, len(s.Header.Keys))
		for i, p := range s.Header.Keys {
			k, err := keys.Parse(strings.Replace(p.Name, "<q>", "q", 1))
			if err != nil || k.Role != keys.Bus || k.ID != "" {
				panic(fmt.Sprintf("bus: script %s: KEYS[%d] %q is not a queue key of the grammar", s.Name, i+1, p.Name))
			}
			types[i] = k.Type
		}
		out[s] = types
	}
	return out
}

// queueKey is q's key of type t.
func queueKey(q keys.Queue, t keys.Type) string {
	switch t {
	case keys.Pending:
		return q.Pending()
	case keys.Active:
		return q.Active()
	case keys.Schedule:
		return q.Schedule()
	case keys.Dead:
		return q.Dead()
	case keys.Meta:
		return q.Meta()
	case keys.Wake:
		return q.Wake()
	}
	panic("bus: no queue key of type " + t.String())
}

// keysOf is the KEYS of s for queue q.
func keysOf(s *lua.Script, q keys.Queue) []string {
	types := scriptKeys[s]
	out := make([]string, len(types))
	for i, t := range types {
		out[i] = queueKey(q, t)
	}
	return out
}

// exec runs one script and returns its reply, with the ack the call asked for. The error is
// the script's (translated), else the ack's (an *AckError, with a valid reply), else nil.
func (b *Bus) exec(ctx context.Context, r lua.Run, ack *Ack) (valkey.ValkeyMessage, error) {
	out, err := b.execMulti(ctx, []lua.Run{r}, ack)
	if len(out) == 0 {
		return valkey.ValkeyMessage{}, err
	}
	if out[0].err != nil {
		return valkey.ValkeyMessage{}, out[0].err
	}
	return out[0].msg, err
}

// result is one reply of execMulti.
type result struct {
	msg valkey.ValkeyMessage
	err error // translated
}

// execMulti runs several scripts of one queue (one slot) in one round trip, in order. With a
// Replicated or Persisted ack it runs them on one dedicated connection followed by WAIT or
// WAITAOF, so the wait covers exactly these writes on the node that applied them. The second
// return value is the ack's error (an *AckError) or a transport error of the whole call.
//
// A script the cluster refused before running it (MOVED, ASK, TRYAGAIN, CLUSTERDOWN: a
// failover or a slot migration under way) is sent again, alone with the others so refused,
// after a short pause, a bounded number of times: it did not run, so a second send cannot
// apply it twice. valkey-go follows MOVED and ASK itself, but not on a dedicated connection,
// and it does not resend a write on TRYAGAIN or CLUSTERDOWN. Any other error reply may come
// from a script that ran in part, and is returned as it is.
func (b *Bus) execMulti(ctx context.Context, runs []lua.Run, ack *Ack) ([]result, error) {
	if ack != nil && ack.Durability != Primary {
		if err := ack.validate(); err != nil {
			return nil, err
		}
	} else {
		ack = nil
	}
	out := make([]result, len(runs))
	todo := make([]int, len(runs))
	for i := range todo {
		todo[i] = i
	}
	var ackErr error
	pause := redirectPause
	for attempt := 1; ; attempt++ {
		batch := make([]lua.Run, len(todo))
		for j, i := range todo {
			batch[j] = runs[i]
		}
		got, err := b.execOnce(ctx, batch, ack)
		if got == nil {
			return nil, err
		}
		again := todo[:0:0]
		for j, i := range todo {
			if attempt < redirectAttempts && redirected(got[j].err) && ctx.Err() == nil {
				again = append(again, i)
				b.resent.Add(1)
				continue
			}
			out[i] = got[j]
		}
		if len(again) < len(todo) && ackErr == nil {
			ackErr = err // the wait covered scripts that ran
		}
		if len(again) == 0 {
			return out, ackErr
		}
		todo = again
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		pause = min(2*pause, maxRedirectPause)
	}
}

// How execMulti resends scripts the cluster refused before running them: up to
// redirectAttempts sends, pausing 10 ms, doubling up to 250 ms (about 4 s in all), so that a
// failover or a migration's last step completes meanwhile.
const (
	redirectAttempts = 20
	redirectPause    = 10 * time.Millisecond
	maxRedirectPause = 250 * time.Millisecond
)

// redirected reports whether err is a cluster reply that refuses a command before it runs.
func redirected(err error) bool {
	ve, ok := valkey.IsValkeyErr(err)
	if !ok {
		return false
	}
	if _, ok := ve.IsMoved(); ok {
		return true
	}
	if _, ok := ve.IsAsk(); ok {
		return true
	}
	return ve.IsTryAgain() || ve.IsClusterDown()
}

// execOnce is one send of execMulti; got is nil only when nothing was sent.
func (b *Bus) execOnce(ctx context.Context, runs []lua.Run, ack *Ack) (got []result, err error) {
	if ack == nil {
		if len(runs) == 1 {
			msg, err := runs[0].Script.Exec(ctx, b.client, runs[0].Keys, runs[0].Args).ToMessage()
			return []result{{msg, translate(err)}}, nil
		}
		replies, _ := lua.Pipeline(ctx, b.client, runs, nil)
		return results(replies), nil
	}
	var ackErr error
	err = b.client.Dedicated(func(dc valkey.DedicatedClient) error {
		replies, wait := lua.Pipeline(ctx, dc, runs, ack.command)
		got, ackErr = results(replies), ack.check(wait)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return got, ackErr
}

// results reads and translates pipelined replies.
func results(replies []valkey.ValkeyResult) []result {
	out := make([]result, len(replies))
	for i, r := range replies {
		msg, err := r.ToMessage()
		out[i] = result{msg, translate(err)}
	}
	return out
}

// Durability says when a write call returns.
type Durability uint8

// The durability levels.
const (
	// Primary, the default, returns when the primary has applied the write: at-least-once
	// while the primary lives.
	Primary Durability = iota
	// Replicated follows the write with WAIT on the same connection and node, and returns
	// when Ack.Replicas replicas acknowledged it or Ack.Timeout passed.
	Replicated
	// Persisted follows the write with WAITAOF on the same connection and node, and returns
	// when the primary fsynced its AOF and Ack.Replicas replicas did, or Ack.Timeout passed.
	Persisted
)

// String is the level's name: primary, replicated or persisted.
func (d Durability) String() string {
	switch d {
	case Primary:
		return "primary"
	case Replicated:
		return "replicated"
	case Persisted:
		return "persisted"
	}
	return "Durability(" + strconv.Itoa(int(d)) + ")"
}

// Ack is the durability a write call asks for. The zero Ack is [Primary].
//
// When fewer acknowledgements come back than asked, the call returns an *[AckError]
// (errors.Is(err, [ErrNotDurable])) together with its normal result: the write was applied on
// the primary and may still exist, so a caller that retries must be ready to find it done.
type Ack struct {
	Durability Durability
	// Replicas is how many replicas must acknowledge. Default 1 for Replicated; default 0 for
	// Persisted (the primary's own fsync).
	Replicas int
	// Timeout is how long the server waits for the acknowledgements. Default 1 s
	// ([DefaultAckTimeout]).
	Timeout time.Duration
}

func (a *Ack) validate() error {
	if a.Durability > Persisted || a.Replicas < 0 || a.Timeout < 0 {
		return fmt.Errorf("%w: ack: unknown durability or negative replicas or timeout", ErrInvalid)
	}
	return nil
}

func (a *Ack) replicas() int {
	if a.Replicas == 0 && a.Durability == Replicated {
		return 1
	}
	return a.Replicas
}

// timeout is the wait the server is asked for: whole milliseconds, rounded up.
func (a *Ack) timeout() time.Duration {
	if a.Timeout == 0 {
		return DefaultAckTimeout
	}
	return time.Duration(msCeil(a.Timeout)) * time.Millisecond
}

func (a *Ack) command(bld valkey.Builder) valkey.Completed {
	timeoutMs := a.timeout().Milliseconds() // whole already, and at least 1: 0 would block forever
	if a.Durability == Persisted {
		return bld.Waitaof().Numlocal(1).Numreplicas(int64(a.replicas())).Timeout(timeoutMs).Build()
	}
	return bld.Wait().Numreplicas(int64(a.replicas())).Timeout(timeoutMs).Build()
}

// check reads the wait's reply.
func (a *Ack) check(r valkey.ValkeyResult) error {
	e := &AckError{Durability: a.Durability, Wanted: a.replicas(), Timeout: a.timeout()}
	msg, err := r.ToMessage()
	if err != nil {
		if _, ok := valkey.IsValkeyErr(err); ok {
			e.Err = err
			return e
		}
		return fmt.Errorf("bus: %s write: waiting for acknowledgements (the write may still exist): %w", a.Durability, err)
	}
	if a.Durability == Persisted {
		arr, err := msg.ToArray()
		if err != nil || len(arr) != 2 {
			return protocolError("waitaof", "reply %v", msg)
		}
		local, _ := arr[0].AsInt64()
		n, _ := arr[1].AsInt64()
		e.LocalAOF, e.Acked = local >= 1, int(n)
		if e.LocalAOF && e.Acked >= e.Wanted {
			return nil
		}
		return e
	}
	n, err := msg.AsInt64()
	if err != nil {
		return protocolError("wait", "reply %v", msg)
	}
	e.Acked = int(n)
	if e.Acked >= e.Wanted {
		return nil
	}
	return e
}

// msCeil is the duration d in whole milliseconds, rounded up: a positive lease, delay or
// timeout never becomes 0 (which the scripts read as "none" or refuse) and is never shorter
// than asked. Instants go the other way: an EnqueueOpts.At is sent as its UnixMilli,
// rounded down, so a run-at is never later than asked.
func msCeil(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
