package bus

import (
	"cmp"
	"fmt"
	"log/slog"
	"time"
)

// Defaults of [WorkerConfig].
const (
	// DefaultConcurrency is how many handlers a worker runs at once.
	DefaultConcurrency = 10
	// DefaultJobTimeout caps a handler's runtime.
	DefaultJobTimeout = time.Minute
	// DefaultWakeTimeout is the longest an idle worker blocks on the wake list before it
	// looks for work again by itself.
	DefaultWakeTimeout = 5 * time.Second
	// DefaultHousekeepInterval is how often a worker reaps expired leases and promotes due
	// scheduled jobs of its queue.
	DefaultHousekeepInterval = 2 * time.Second
	// MaxPrefetch bounds WorkerConfig.Prefetch.
	MaxPrefetch = maxClaim
	// maxConcurrency is the largest Concurrency the worker uses; a larger one counts as it.
	maxConcurrency = 1 << 30
	// maxScriptUint is the largest count a script takes (its uint rule: at most 15 digits).
	maxScriptUint = 999_999_999_999_999
)

// WorkerConfig configures a [Worker]. Queue is required; every zero field means its default.
type WorkerConfig struct {
	// Queue is the queue the worker drains. One worker drains one queue; run one worker per
	// queue (they may share a Bus).
	Queue string
	// Concurrency is how many handlers run at once. Claims never take more jobs than there
	// are free slots and the prefetch buffer (Prefetch) together. Default 10
	// ([DefaultConcurrency]); more than 1<<30 counts as 1<<30.
	Concurrency int
	// Prefetch is how many jobs beyond the free slots the worker claims ahead: they wait, leased,
	// in a buffer, and a handler that returns starts the next one at once instead of waiting for a
	// round trip. The cost: a buffered job is leased (and its attempts counted, and it counts
	// against its lane's cap) while it waits, so another worker cannot take it, and heartbeats
	// renew its lease like a running one's; a worker that crashes leaves its buffered jobs to
	// their leases: another worker runs them once a lease ran out and a reap put them back (none
	// is lost; their handlers had not started, so none runs twice), a lease later than if they had
	// waited in pending. Close runs the buffered jobs before it returns (unless a stall hands them
	// back first, below); past its deadline it hands those not started back to pending. At most
	// [MaxPrefetch]; negative: none, the worker still claims for the slots that free while earlier
	// round trips are in flight.
	//
	// Default 0: automatic. The buffer holds about as many jobs as the handlers finish while one
	// round trip is in flight: Concurrency × mean round trip time ÷ mean handler run time (moving
	// averages of the round trips answered and the handlers returned), at most Concurrency, and
	// none until a handler returned. So a buffered job waits about one round trip on average,
	// handlers of one pace assumed, and a worker buffers nothing once its handlers run longer than
	// Concurrency round trips. When handlers that were fast stall (no handler returned for a
	// heartbeat interval, and at least a second), the heartbeat hands the jobs buffered that long
	// back to pending, for another worker (or this one, once a slot frees), each claim counting as
	// an attempt as any hand-back's does, and the buffer shrinks. [WorkerStats].Prefetch reads the
	// size. Measured (make bench-profile, no-op jobs, concurrency 20, one run): the automatic
	// buffer doubles the jobs per claim (9 to 18) and cuts the CPU per job by about a fifth on the
	// server and in the worker, against none.
	Prefetch int
	// Lease is the lease of a claim and what heartbeats renew a job to (a kind may name its
	// own, [HandlerOpts.Lease]). A crashed worker's jobs run again after it. The shortest
	// lease also bounds each round trip of the worker to the server: half of it, from 1 s to
	// 10 s, so a node that stops answering holds the worker up for less than a lease. A worker
	// process paused for longer than that bound (a SIGSTOP, a stalled VM) gives up the round
	// trips it had in flight even when their replies arrived meanwhile: the jobs a lost claim
	// reply leased run after their lease, on any worker, an attempt counted, as after any reply
	// lost on the way. Default the bus's Config.Lease (30 s).
	Lease time.Duration
	// HeartbeatInterval is how often one batched extend renews every lease the worker holds.
	// It must be shorter than the Lease of the worker and of every kind. Default a third of
	// the shortest lease of the worker and its kinds, and at least 10 ms.
	HeartbeatInterval time.Duration
	// JobTimeout caps a handler's runtime (see [HandlerOpts.Timeout]). Default 1 min
	// ([DefaultJobTimeout]); negative: none.
	JobTimeout time.Duration
	// MaxAttempts is the maximum of claims of a failing job, for kinds that name none.
	// Default: the queue's, else the bus's (see [Bus.SetMaxAttempts]).
	MaxAttempts int
	// Backoff is the retry delay for kinds that name none. Default [DefaultBackoff].
	Backoff func(attempt int64) time.Duration
	// Codec decodes the args of kinds that name none. Default [JSONCodec].
	Codec Codec
	// WakeTimeout is the longest an idle worker blocks on the queue's wake list before it
	// claims and reads the schedule again by itself. Default 5 s ([DefaultWakeTimeout]).
	WakeTimeout time.Duration
	// HousekeepInterval is how often the worker reaps its queue's expired leases and promotes
	// its due scheduled jobs, at most HousekeepLimit of each per round trip (again at once
	// while a batch comes back full). Every worker does it; the scripts are atomic, so no
	// leader is needed and no job moves twice. Default 2 s ([DefaultHousekeepInterval]),
	// jittered by ±20 %; negative: none.
	HousekeepInterval time.Duration
	// HousekeepLimit bounds one reap and one promote. Default 100 ([DefaultLimit]); at most
	// 999999999999999, the scripts' bound.
	HousekeepLimit int
	// Logger receives the worker's log lines: job outcomes at Debug, handler errors and
	// stale answers at Warn, dead jobs and transport errors at Error. Default slog.Default().
	Logger *slog.Logger
	// OnEvent, when set, is called for every [JobEvent], in order, on the worker's loop
	// goroutine: it must return quickly. Default none.
	OnEvent func(JobEvent)
	// ClaimAck is the durability the worker's claims must reach before their handlers start
	// (see [Ack]). With [Replicated], a round trip that claims is followed by WAIT on the
	// queue's primary, so a replica promoted by a failover has seen every claim whose handler
	// runs: it knows the claim's attempts and cannot mint the same token again for a second
	// holder. A claim that falls short of it starts no handler: its jobs are handed back
	// (JobHandedBack, no failure counted) and the worker backs off before it claims again,
	// from 50 ms doubling to 2 s; the heartbeat does not wait for that backoff, so the jobs
	// already running keep their leases. Each claim still counts in the job's attempts (they only
	// grow: that is the fence), so a replica down for long brings the jobs nearer their
	// MaxAttempts. The cost is one WAIT per round trip that claims, on a connection of its own.
	// Default the zero Ack ([Primary]): handlers start once the primary applied the claim,
	// and a failover to a replica that missed the claim can hand the same token to two
	// holders.
	ClaimAck Ack

	// ID names the worker in the stats it publishes (its field of emq:{<q>}:workers): 1 to 512
	// bytes with no control bytes, unique among the queue's workers. Default
	// <host>-<pid>-<8 random hex>.
	ID string
	// StatsInterval is how often the worker publishes its [WorkerStats] for tools in other
	// processes ([Bus.WorkerStats]); each snapshot stays live for 3 intervals, and the worker
	// withdraws it when it stops. Between 10 ms and 8 h ([MinStatsInterval],
	// [MaxStatsInterval]). Default 5 s ([DefaultStatsInterval]); negative: never.
	StatsInterval time.Duration
	// Middleware wraps every kind's handler, the first outermost, outside the kind's own
	// ([HandlerOpts.Middleware]). Handlers are wrapped once, when they are registered. Default
	// none.
	Middleware []Middleware
}

// withDefaults is c with every zero field set to its default; the Lease's is the bus's.
// HeartbeatInterval's default needs the kinds' leases: Start computes it.
func (c WorkerConfig) withDefaults(busLease time.Duration) WorkerConfig {
	// Past maxConcurrency a bound is no bound (the pool grows with the jobs claimed), and the
	// loop's sums of slots and prefetch must not overflow.
	c.Concurrency = min(cmp.Or(c.Concurrency, DefaultConcurrency), maxConcurrency)
	c.Lease = cmp.Or(c.Lease, busLease)
	c.JobTimeout = cmp.Or(c.JobTimeout, DefaultJobTimeout)
	if c.Backoff == nil {
		c.Backoff = DefaultBackoff
	}
	if c.Codec == nil {
		c.Codec = JSONCodec{}
	}
	c.WakeTimeout = cmp.Or(c.WakeTimeout, DefaultWakeTimeout)
	c.HousekeepInterval = cmp.Or(c.HousekeepInterval, DefaultHousekeepInterval)
	c.HousekeepLimit = cmp.Or(c.HousekeepLimit, DefaultLimit)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c.withReportDefaults()
}

// validate refuses what no default mends; it runs on c.withDefaults(...).
func (c WorkerConfig) validate() error {
	const where = "bus.NewWorker"
	err := notNegative(where,
		field{"Concurrency", int64(c.Concurrency)}, field{"Lease", int64(c.Lease)},
		field{"HeartbeatInterval", int64(c.HeartbeatInterval)}, field{"MaxAttempts", int64(c.MaxAttempts)},
		field{"WakeTimeout", int64(c.WakeTimeout)}, field{"HousekeepLimit", int64(c.HousekeepLimit)})
	if err != nil {
		return err
	}
	if c.HousekeepLimit > maxScriptUint {
		return fmt.Errorf("%w: %s: HousekeepLimit %d is more than %d: reap and promote would refuse every call", ErrInvalid, where, c.HousekeepLimit, int64(maxScriptUint))
	}
	if c.Prefetch > MaxPrefetch {
		return fmt.Errorf("%w: %s: Prefetch %d is more than %d (MaxPrefetch)", ErrInvalid, where, c.Prefetch, MaxPrefetch)
	}
	if err := c.ClaimAck.validate(); err != nil {
		return fmt.Errorf("%s: ClaimAck: %w", where, err)
	}
	if err := c.validateReport(where); err != nil {
		return err
	}
	if c.HeartbeatInterval > 0 && c.HeartbeatInterval >= c.Lease {
		return fmt.Errorf("%w: %s: HeartbeatInterval %v is not shorter than Lease %v: leases would run out between heartbeats", ErrInvalid, where, c.HeartbeatInterval, c.Lease)
	}
	return nil
}
