// Package bus is EchoMQ: a job queue over Valkey whose protocol is the closed key grammar of
// package keys plus the atomic Lua scripts of package lua, and the broadcast topics (sharded
// pub/sub, from package topic) that also carry EchoCache's invalidations.
//
// # The model
//
// The jobs in the sets are the work. A queue q is four sorted sets, a meta hash, a wake list
// and one row per job, all under the hash tag {q}, so every transition is one single-slot
// script:
//
//	emq:{q}:pending    score 0: lex order is mint order (FIFO, browse, time range)
//	emq:{q}:active     scored by lease deadline, ms on the server's clock
//	emq:{q}:schedule   scored by run-at, ms
//	emq:{q}:dead       score 0
//	emq:{q}:meta       paused, max_attempts, dead_max
//	emq:{q}:wake       a short list of wake-up markers (see below)
//	emq:{q}:job:<id>   the row: exactly state, attempts, payload
//	emq:{q}:errors:<id> the job's failure history, beside the row (never in it)
//	emq:{q}:result:<id> a retired job's result, only when its completion asked, with a TTL
//	emq:{q}:uniq:<key> an idempotency guard holding the first job's id, with a TTL
//
// Ids are JOB ids minted by the client ([keys.NewJobID]), so an id carries its mint time and
// sorts in mint order. A claim increments attempts; that count is the job's fencing token.
// Every verb on a claimed job ([Bus.Complete], [Bus.Fail], [Bus.Extend], [Bus.Snooze]) checks
// inside its script that the row is active and holds the caller's token, and otherwise
// changes nothing and answers [ErrStale] (a *[StaleError] with the reason). A holder whose
// lease ran out is fenced the moment [Bus.Reap] hands the job to the next claim.
//
// A row's state is pending, active, scheduled or dead, each in the set it names, or
// cancelling: a claimed job that [Bus.Cancel] cancelled, still in active until its holder
// stops it at its next heartbeat (cause [ErrCancelled]) and it goes to dead. Each failed
// attempt (a handler's error, an expired lease, a cancel) joins the job's failure history,
// the last [MaxFailures] kept, until the job is retired or purged; [Bus.Lookup] reads it as
// [JobInfo].Failures. Completion retires the row and nothing remains, unless it asked to keep
// a result ([CompleteOpts].ResultTTL, [HandlerOpts].ResultTTL with [SetResult]): Lookup then
// answers the result as a job in [StateRetired] until its TTL.
//
// # One complete flow
//
//	client, _ := valkey.NewClient(valkey.ClientOption{InitAddress: []string{"127.0.0.1:6379"}, DisableCache: true})
//	b, _ := bus.New(client, bus.Config{})
//
//	// Producer: one job now, one in ten minutes, one only once per order.
//	b.Enqueue(ctx, "emails", []byte(`{"to":"ada"}`), nil)
//	b.Enqueue(ctx, "emails", []byte(`{"to":"bob"}`), &bus.EnqueueOpts{Delay: 10 * time.Minute})
//	b.Enqueue(ctx, "emails", payload, &bus.EnqueueOpts{UniqueKey: "order-42"})
//
//	// Consumer: claim up to 10, work, complete or fail.
//	jobs, err := b.Claim(ctx, "emails", &bus.ClaimOpts{Count: 10, Lease: time.Minute})
//	for _, j := range jobs {
//		if err := send(j.Payload); err != nil {
//			b.Fail(ctx, j, &bus.FailOpts{Backoff: 30 * time.Second}) // dead after MaxAttempts claims
//			continue
//		}
//		if err := b.Complete(ctx, j, nil); errors.Is(err, bus.ErrStale) {
//			// The lease ran out and the job was handed on: this holder's work is not recorded.
//		}
//	}
//
//	// Housekeeping, from any number of processes: leases past their deadline go back to
//	// pending (or dead), due scheduled jobs to pending. Claims also promote due jobs first.
//	b.Reap(ctx, "emails", nil)
//	b.Promote(ctx, "emails", nil)
//
//	// Operators: counts, browsing, one job and why it died, dead-letter handling, pause.
//	counts, _ := b.Counts(ctx, "emails")
//	page, _ := b.Browse(ctx, "emails", &bus.BrowseOpts{Set: keys.Dead, Newest: true})
//	info, _ := b.Lookup(ctx, "emails", page.IDs[0]) // info.Failures: attempt, time, error
//	b.RetryDead(ctx, "emails", info.ID)
//	b.SetDeadLimit(ctx, "emails", 10_000) // dead keeps its 10,000 newest jobs (default: all)
//	running, _ := b.Browse(ctx, "emails", &bus.BrowseOpts{Set: keys.Active}) // deadline, token
//	b.Cancel(ctx, "emails", running.IDs[0]) // its worker stops it at the next heartbeat
//	b.Pause(ctx, "emails")
//	b.DropQueue(ctx, "old-emails", nil) // every key of the queue, a SCAN step a call
//
//	// Topics: every subscriber hears every message published while it is subscribed.
//	sub, _ := b.Subscribe(ctx, []string{"prices"}, func(e bus.Event) { ... })
//	defer sub.Close()
//	b.Publish(ctx, "prices", []byte("EURUSD 1.08"))
//
// The package's examples run these calls against a real server and check their output: the
// package example (enqueue, claim, complete, a stale complete), the one of [Bus.Fail]
// (retries until dead) and the one of [Bus.RetryDead] (counts, browsing dead, lookup, retry).
// examples/jobs is the whole flow as a program.
//
// # Workers
//
// A [Worker] drives that loop for one queue. Work is typed by kind: a stable name that
// travels at the head of the payload (the envelope, see [Envelope]), because a job row has
// exactly three fields and one queue carries many kinds. Args are encoded by a [Codec] (JSON
// by default); [HandleRaw] takes them as bytes.
//
//	type Email struct{ To string }
//	w, _ := bus.NewWorker(b, bus.WorkerConfig{Queue: "emails", Concurrency: 20})
//	bus.MustHandle(w, "email.send", func(ctx context.Context, t *bus.Task[Email]) error {
//		if err := send(ctx, t.Args.To); errors.Is(err, errBadAddress) {
//			return bus.SkipRetry(err) // straight to dead
//		} else if errors.Is(err, errRateLimited) {
//			return bus.Snooze(time.Minute) // again later, not counted as a failure
//		}
//		return err // nil completes; an error retries with exponential backoff and jitter
//	}, &bus.HandlerOpts{Timeout: 30 * time.Second})
//	w.Start()
//	bus.EnqueueTask(ctx, b, "emails", "email.send", Email{To: "ada"}, nil)
//	...
//	w.Close(shutdownCtx) // stop claiming, finish or hand back running jobs
//	fmt.Printf("%+v\n", w.Stats())
//
// The example of [Worker] runs that worker on one task.
//
// The worker runs at most Concurrency handlers and claims only as many jobs as it has free
// slots and prefetch buffer (WorkerConfig.Prefetch, sized automatically by default). One
// goroutine decides what to send, in pipelined round trips: the outcomes of the handlers that
// finished, the heartbeat (one extend for every lease held, on one timer; a lost lease cancels
// the handler's context with cause [ErrLeaseLost], a cancelled job with cause [ErrCancelled],
// and a job of either kind still waiting in the prefetch buffer never runs), housekeeping (a
// bounded reap and promote on a jittered timer, in every worker, with no leader) and the claim
// for the free slots. The completes and the claim go in one completeclaim script call, each
// finished job fenced by its own token, so a busy worker completes and claims in one call of
// one round trip; a job that keeps a result ([SetResult]) has a complete of its own beside it.
// Two round trips are in flight at once: the next is built and sent while the previous is on
// the server, and replies are applied in the order their round trips were sent. Handlers run on
// a pool of Concurrency goroutines that take claimed jobs in claim order by themselves; a
// kind's timeout is a deadline on the handler's context (ctx.Deadline reports it) enforced by
// one timer for the whole worker. Idle, it blocks on the wake list with BLPOP on a connection
// of its own (valkey-go's blocking pool, so the shared pipeline never stalls) and arms a timer
// for the earliest scheduled run-at, read on the server's clock ([Bus.NextDue]); it never polls
// on a fixed sleep. A job another process schedules before that run-at (or into an empty
// schedule) wakes one idle worker with the marker "s", and it reads the schedule's head again:
// the job runs at its run-at.
//
// # Waking idle workers
//
// Enqueue, promote, resume, retry and the verbs that put a job back in pending push one
// marker (the value "1") on the queue's wake list ([keys.Queue.Wake]) when they made a job
// pending and the queue is not paused, and trim the list to its 16 newest markers. An idle
// worker blocks on it with BLPOP (or BLMOVE) and a timeout instead of polling, and claims
// when it wakes. Markers pushed while no worker waited stay in the list, so a worker that
// blocks later wakes at once. A marker is a hint, not a job: a woken worker may find nothing
// to claim. An enqueue that schedules a job earlier than the schedule's head (or into an
// empty schedule) pushes the marker "s" instead: a [Worker] woken by it reads the head again
// ([Bus.NextDue]) and arms its timer for that run-at, which it claims at (a claim promotes due
// jobs first). A job scheduled behind the head pushes nothing: every worker's timer already
// fires earlier, and re-reads the head then. A fail or snooze that schedules a retry pushes
// nothing either: the worker that handed the job back arms its own timer for the retry.
//
// # Durability
//
// By default a write call returns when the primary applied it: at-least-once while the
// primary lives. An [Ack] asks for more: [Replicated] follows the script with WAIT on the same
// connection and node, [Persisted] with WAITAOF. When fewer acknowledgements come back than
// asked within the timeout, the call returns an *[AckError] ([ErrNotDurable]) together with
// its normal result: the write was applied on the primary and may still exist, so a caller
// that retries must be ready to find it done (idempotency keys make enqueue retries safe).
// The wait shares the script's round trip when it ends, reply included, well before the
// caller's context can; otherwise it takes a round trip of its own and is shortened to end
// before the context's deadline, so a context that ends during the wait still gets the
// write's result, with an *AckError carrying the context's error.
//
// Across a failover the attempts counter is only as safe as its replication: a replica that
// missed a claim and is then promoted would mint the same token again, and a zombie holding it
// could complete the job. [WorkerConfig].ClaimAck makes a worker's claims wait for a replica
// before their handlers start (a claim that falls short starts nothing and hands its jobs
// back); README's Reliability section lists what each level guarantees across which fault.
//
// # Broadcast topics and invalidations
//
// [Bus.Publish] and [Bus.Subscribe] use sharded pub/sub (SPUBLISH, SSUBSCRIBE) on topic
// channels; [Bus.SubscribeChannels] also takes tables' invalidation channels
// ([keys.Table.Inval]), which the cache's scripts publish on. Delivery is at most once: a
// message published while a subscriber is disconnected is lost, and the subscriber is told,
// because a cache must then flush what those channels cover. A subscription delivers
// [Event]s to its handler on its own goroutine: [Message]; [Subscribed] after the first
// subscribe and after resubscribes (Resubscribed, Count); [Disconnected] when a connection
// drops (it resubscribes by itself, with backoff); and [Overflow] when the handler fell
// behind and messages were dropped at that point of the stream. Nothing is dropped silently.
// A handler that is behind gets a flapping connection's drops and resubscribes coalesced
// into the latest Disconnected and Subscribed (see package topic), so what is queued stays
// bounded.
//
// The topics are package topic's, and are also available on their own there (topic.New,
// with no queue; the cache subscribes to its invalidations that way). These three verbs
// delegate to a topic.Topics that [New] builds from [Config].MaxPayload and
// [Config].SubscribeBuffer; [Event], [EventKind] and [Subscription] are topic's types under
// the bus's names, and the verbs' errors match [ErrInvalid] and [ErrTooLarge] as well as
// topic's own sentinels.
//
// # Periodic jobs
//
// A periodic schedule is a row of its queue ([Bus.DeclarePeriodic]: a cron spec in a zone, or
// a fixed period, the task it enqueues and a [MissedPolicy]). Any number of processes run a
// [Scheduler] for the queue; there is no leader. Each pass reads the server's TIME and the
// rows, computes the due ticks and fires each one through one script that enqueues only when
// the tick is newer than the row's last: the tick is the fence, so one tick is one job however
// many schedulers see it, and the job's id ([keys.JobIDAt]) carries the tick as its mint
// time. Pass [Worker.Handles] as [SchedulerConfig].Handles to have a kind no worker runs
// reported where it fires. See examples/periodic.
//
// # Lanes
//
// A lane is a named sub-stream of a queue: a tenant, an account, a partner. A job joins one
// at enqueue ([EnqueueOpts].Lane, also through [TaskOpts]) and may carry a priority, 0 (the
// default) to 3 ([EnqueueOpts].Priority). The row keeps its three fields: the lane and the
// priority live in a per-queue hash (keys.JobLane) written only for such jobs, and every
// script that retires or moves a job reads that hash's type once per call, so a queue without
// lanes pays one command and claims exactly as before.
//
// A claim serves the waiting jobs of priority 1 to 3 first (strictly by priority, then mint
// order), then the lanes with waiting work in round robin by virtual time (keys.LaneReady): a
// turn gives at most 32 of the lane's oldest jobs and adds n/weight to its score for the n it
// gave, so lanes get equal shares over time, a claim of more than a turn spans lanes, and a
// newcomer's first job waits for one turn of each lane at most, however long their backlogs.
// A lane may have a cap (the most of its jobs claimed at once, fleet-wide and exact, counted
// by the scripts in keys.LaneActive and given back by complete, fail, snooze, reap and
// [RateLimited]), a rate ([Rate]: GCRA with a burst, and never more than the burst in one
// window, on the server's clock), a weight and a pause ([Bus.SetLaneLimits],
// [Bus.PauseLane], [Bus.ResumeLane]); a queue may have a rate of its own and default limits
// for every lane ([Bus.SetQueueLimits]).
// A lane at its cap or held by its rate is skipped; the claim reply carries the earliest
// moment a held lane may give work, which an idle [Worker] sleeps until (no polling), and a
// slot freed in a lane its cap had stopped pushes a wake marker. A handler that returns
// [RateLimited](d) (a partner's 429) hands its job back with its attempt refunded and closes
// its lane for d. [Bus.Lanes], [Bus.Lane] and [Bus.ListLanes] read the state; [Counts] and
// [JobInfo] show lanes; [BrowseOpts].Lane browses one lane. The whole scheme is FORMAT lanes
// in lua/laneclaim.lua.
//
// # Operating a queue
//
// [Bus.Queues] lists every queue a client wrote to, empty ones included: one sorted set
// outside any hash tag (keys.QueueRegistry), which a Bus adds a queue to after its first
// successful write and a [Worker] when it starts. Every Worker publishes its [WorkerStats]
// every [WorkerConfig].StatsInterval (default 5 s) for tools in other processes;
// [Bus.WorkerStats] sums the live workers' snapshots and [FleetStats.Rates] turns two reads
// into rates. [WorkerConfig].Middleware and [HandlerOpts].Middleware wrap handlers
// ([Middleware], [Handler], [Call]), once per kind at registration; package echotest runs a
// handler the same way without a server.
//
// # Errors
//
// Script errors arrive as the package's errors: [ErrStale], [ErrPaused], [ErrNotFound],
// [ErrState], [ErrInvalid] (names and ids also match keys.ErrInvalid), [ErrTooLarge],
// [ErrWrongType], [ErrExists], [ErrNotDurable], [ErrNoSchedule], [ErrCancelled]. Every script
// checks all its preconditions before its first write, so a refused call wrote nothing.
//
// # The protocol is the contract
//
// A client in another language that loads the files of package lua and follows their
// headers (KEYS in grammar form, ARGV by name and rule, FORMAT, REPLY, ERROR) behaves exactly
// as this package does: PROTOCOL.md collects the headers, and the language-neutral vectors of
// conformance/ replay them by raw EVALSHA.
package bus
