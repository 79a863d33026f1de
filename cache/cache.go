package cache

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/tables"
	"github.com/echocache/echocache/topic"
)

// Config configures a [Cache]. The zero Config is valid: a zero field means the default
// written beside it.
type Config struct {
	// Logger receives what cannot be returned to a caller: failed background early
	// refreshes, L2 writes that failed after a load succeeded (the caller got its value; only
	// the row is missing), failed invalidation subscriptions and reconciles, and the breaker
	// and degraded-mode transitions. Default slog.Default(), as a bus Worker's; pass
	// slog.New(slog.DiscardHandler) to drop them.
	Logger *slog.Logger

	// ID names this Cache in the stats it publishes (its field of each table's
	// ecc:{<table>}#stats): 1 to 512 bytes with no control bytes, unique among the caches
	// that declare a table. Default <host>-<pid>-<8 random hex>.
	ID string

	// StatsInterval is how often the Cache publishes each table's [Stats] for tools in other
	// processes ([ReadStats]); each snapshot stays live for 3 intervals, and Close withdraws
	// them. Between 10 ms and 8 h ([MinStatsInterval], [MaxStatsInterval]). Default 5 s
	// ([DefaultStatsInterval]); negative: never (tables are still listed in the registry,
	// [Tables]).
	StatsInterval time.Duration

	// ReconcileInterval is how often the cache reads every table's coherence record and
	// flushes the tables whose sequence moved past the invalidations it received: the bound
	// on how long a lost invalidation can leave a value stale. At least 10 ms. Default
	// DefaultReconcileInterval (5 seconds).
	ReconcileInterval time.Duration

	// SubscribeTimeout bounds how long NewTable waits for the table's invalidation
	// subscription. A table whose subscription is not confirmed keeps working without L1 (no
	// L1 entry can miss an invalidation) until the background loop subscribes it. Default
	// DefaultSubscribeTimeout (5 seconds).
	SubscribeTimeout time.Duration

	// SubscribeBuffer is how many invalidation messages may wait for the subscriber before
	// it drops them; a drop flushes every table's L1, never silently. Default 1024
	// ([DefaultSubscribeBuffer]).
	SubscribeBuffer int

	// BreakerFailures is how many L2 failures in a row (timeouts, broken connections; not
	// error replies, not a caller's cancellation) open the cache's circuit breaker: reads
	// then skip L2, tables in degraded mode answer from their loaders, and every
	// BreakerProbe the reconcile reads the coherence records to see whether Valkey is back.
	// Default DefaultBreakerFailures (3).
	BreakerFailures int

	// BreakerProbe is how often an open breaker probes Valkey; the first probe that
	// succeeds closes it, and the same reconcile settles the tables before their L1s are
	// trusted again. At least 1 ms. Default DefaultBreakerProbe (500 ms).
	BreakerProbe time.Duration

	// OnInvalidation, when set, is called after each invalidation message has been applied
	// to this cache's L1 (its ids dropped, or the table flushed), with the table's name and
	// the ids the message named (none for a whole-table invalidation), this cache's own
	// writes included. It runs where the message is handled (the subscription's goroutine,
	// or the reader of the connection the message arrived on), which it holds up: it must
	// return quickly and not block. For metrics, and for waiting on propagation exactly (a
	// benchmark that times it needs no polling). Default: nil.
	OnInvalidation func(table string, ids []string)
}

// The defaults a zero [Config] field stands for.
const (
	DefaultReconcileInterval = 5 * time.Second
	DefaultSubscribeTimeout  = 5 * time.Second
	DefaultSubscribeBuffer   = topic.DefaultSubscribeBuffer
	DefaultBreakerFailures   = 3
	DefaultBreakerProbe      = 500 * time.Millisecond
)

// minReconcileInterval is the shortest ReconcileInterval: each reconcile is a round trip
// per slot, and its grace for messages in flight is at least 20 ms.
const minReconcileInterval = 10 * time.Millisecond

// withDefaults returns c with every zero field replaced by its default.
func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.Default() // read at New: a default set by the program later is not seen
	}
	if c.ID == "" {
		c.ID = defaultID()
	}
	c.StatsInterval = cmp.Or(c.StatsInterval, DefaultStatsInterval)
	c.ReconcileInterval = cmp.Or(c.ReconcileInterval, DefaultReconcileInterval)
	c.SubscribeTimeout = cmp.Or(c.SubscribeTimeout, DefaultSubscribeTimeout)
	c.SubscribeBuffer = cmp.Or(c.SubscribeBuffer, DefaultSubscribeBuffer)
	c.BreakerFailures = cmp.Or(c.BreakerFailures, DefaultBreakerFailures)
	c.BreakerProbe = cmp.Or(c.BreakerProbe, DefaultBreakerProbe)
	return c
}

// validate checks a Config with its defaults filled in. The error wraps [ErrInvalid] and
// names the field.
func (c Config) validate() error {
	bad := func(field string, v any, rule string) error {
		return fmt.Errorf("%w: Config.%s is %v; %s", ErrInvalid, field, v, rule)
	}
	switch {
	case c.ReconcileInterval < minReconcileInterval:
		return bad("ReconcileInterval", c.ReconcileInterval, "at least 10ms, or 0 for the default")
	case c.SubscribeTimeout < 0:
		return bad("SubscribeTimeout", c.SubscribeTimeout, "must not be negative")
	case c.SubscribeBuffer < 0:
		return bad("SubscribeBuffer", c.SubscribeBuffer, "must not be negative")
	case c.BreakerFailures < 1:
		return bad("BreakerFailures", c.BreakerFailures, "at least 1, or 0 for the default")
	case c.BreakerProbe < time.Millisecond:
		return bad("BreakerProbe", c.BreakerProbe, "at least 1ms, or 0 for the default")
	case keys.ValidateID(c.ID) != nil:
		return fmt.Errorf("%w: Config.ID: %w", ErrInvalid, keys.ValidateID(c.ID))
	case c.StatsInterval > 0 && (c.StatsInterval < MinStatsInterval || c.StatsInterval > MaxStatsInterval):
		return bad("StatsInterval", c.StatsInterval, "between 10ms and 8h, negative for never, or 0 for the default")
	}
	return nil
}

// Cache is one near-cache over one Valkey client: it owns the table declarations, every
// table's L1, and the background work of its tables. Make one per process (or per
// independent cache), declare its tables with [NewTable], and Close it at shutdown.
type Cache struct {
	client  valkey.Client
	cluster bool // client is a cluster client (see readRows)
	log     *slog.Logger
	reg     tables.Registry
	clk     *clock
	// own prefixes this cache's write tokens (see writeToken), so its subscriber knows its
	// own messages.
	own string

	// closing is cancelled by Close: fills and refreshes in flight stop waiting.
	closing context.Context
	cancel  context.CancelFunc

	mu     sync.RWMutex // guards closed, cores, and work.Add against Close
	closed bool
	done   atomic.Bool          // closed, for the lock-free check on the miss path
	cores  map[string]tableCore // the declared tables, by name
	work   sync.WaitGroup       // fills and refreshes in flight

	coh *coherence
	brk *breaker
	pub *publisher // lists the tables, publishes their stats (publish.go)

	flushCount    int          // cache_flush's SCAN COUNT: flushScanCount
	hookFlushStep func() error // tests: runs before each cache_flush call; an error fails it
}

// tableCore is what the cache needs of each of its typed tables, whatever K and V are:
// stats, and the coherence seams (drop ids, flush) that the invalidation subscriber drives.
type tableCore interface {
	declared() tables.Table
	stats() Stats
	// dropIDs drops ids, given in their row-key form, from L1 and bumps their generations
	// so that fills already in flight do not install them again.
	dropIDs(ids []string)
	// flushL1 drops the table's whole L1 and bumps its epoch.
	flushL1()
	closeL1()
	// attach gives the table its coherence state once it is declared.
	attach(g *tableGroup)
	// pendingCount and retryPending: invalidations that did not reach Valkey, sent when
	// it answers again.
	pendingCount() int
	retryPending(ctx context.Context) error
	// oweAll makes the table owe a whole-table invalidation, sent by retryPending.
	oweAll()
}

// New makes a Cache over client. The client should be made with DisableCache: true unless
// the application also uses valkey-go's client-side caching; a cluster client works as is,
// since every key of one table shares one slot.
func New(client valkey.Client, cfg Config) (*Cache, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: New: nil valkey client", ErrInvalid)
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &Cache{
		client:  client,
		cluster: client.Mode() == valkey.ClientModeCluster,
		log:     cfg.Logger,
		clk:     newClock(),
		own:     newToken()[:ownLen],
		closing: ctx,
		cancel:  cancel,
		cores:   make(map[string]tableCore),

		flushCount: flushScanCount,
	}
	c.brk = &breaker{failures: cfg.BreakerFailures, probe: cfg.BreakerProbe, log: cfg.Logger,
		onOpen: func(err error) { c.coh.breakerOpened(err) }}
	coh, err := newCoherence(c, cfg)
	if err != nil {
		cancel()
		c.clk.stopTicking()
		return nil, fmt.Errorf("cache: New: %w", err)
	}
	c.coh = coh
	c.pub = startPublisher(c, cfg.ID, cfg.StatsInterval)
	return c, nil
}

// Close stops the cache: fills and early refreshes in flight are cancelled and waited for
// (a loader that ignores its context is waited for until it returns), and every table's L1
// is released. Calls on the cache's tables after Close returns answer ErrClosed. Reads must
// not race with Close itself: ristretto cannot close an L1 under a concurrent lookup. Close
// does not close the valkey client. It is safe to call twice.
func (c *Cache) Close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.done.Store(true)
	c.mu.Unlock()
	c.cancel()
	c.coh.close() // no invalidation is applied after this
	c.pub.stop()  // withdraws the published stats
	c.work.Wait()
	// closed is set: no install, drop or flush starts any more, and none is under way
	// (they hold the read lock), so the L1s can be closed.
	c.mu.RLock()
	for _, t := range c.cores {
		t.closeL1()
	}
	c.mu.RUnlock()
	c.clk.stopTicking()
}

// Tables returns the declared tables, sorted by name.
func (c *Cache) Tables() []tables.Table { return c.reg.All() }

// Stats returns every table's counters, by table name.
func (c *Cache) Stats() map[string]Stats {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make(map[string]Stats, len(c.cores))
	for name, t := range c.cores {
		out[name] = t.stats()
	}
	return out
}

// register declares spec and records the typed table built by build. The declaration is
// undone when build fails.
func (c *Cache) register(spec tables.Spec, build func(tables.Table) (tableCore, error)) (tableCore, error) {
	c.mu.RLock()
	closed := c.closed
	c.mu.RUnlock()
	if closed {
		return nil, ErrClosed
	}
	decl, err := c.reg.Declare(spec)
	if err != nil {
		return nil, fmt.Errorf("cache: NewTable: %w", err)
	}
	t, err := build(decl)
	if err != nil {
		c.reg.Forget(decl.Spec.Name)
		return nil, fmt.Errorf("cache: NewTable %s: %w", decl.Spec.Name, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		t.closeL1()
		c.reg.Forget(decl.Spec.Name)
		return nil, ErrClosed
	}
	c.cores[decl.Spec.Name] = t
	t.attach(c.coh.add(decl, t))
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(c.closing, c.coh.subWait)
	defer cancel()
	c.coh.syncTables(ctx)
	c.pub.declared()
	c.mu.Lock() // for the deferred Unlock
	return t, nil
}

// enter registers one unit of background work (a fill or a refresh); false once closed.
func (c *Cache) enter() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return false
	}
	c.work.Add(1)
	return true
}

func (c *Cache) leave() { c.work.Done() }

// detach derives the context a fill runs under: the caller's values without its
// cancellation (one caller giving up must not spoil the fill for the others), a deadline,
// and cancellation when the cache closes.
func (c *Cache) detach(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d)
	stop := context.AfterFunc(c.closing, cancel)
	return fctx, func() { stop(); cancel() }
}

func (c *Cache) isClosed() bool { return c.done.Load() }
