package bus

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
)

// DefaultSchedulerRefresh is how often a [Scheduler] re-reads its queue's index of schedules
// when SchedulerConfig.Refresh is 0.
const DefaultSchedulerRefresh = 5 * time.Second

// schedulerRetry is how long a scheduler waits after a pass that failed.
const schedulerRetry = time.Second

// schedulerFireTimeout bounds the round trip of a pass's fires, which Close lets finish.
const schedulerFireTimeout = 10 * time.Second

// SchedulerConfig configures a [Scheduler]. Queue is required; every other zero field means
// its default.
type SchedulerConfig struct {
	// Queue is the queue whose periodic schedules the scheduler fires.
	Queue string
	// Refresh is how often the queue's index of schedules is re-read, to see schedules
	// declared or removed by other processes; rows already known are re-read at every pass.
	// A schedule declared meanwhile is first seen at the next refresh: under MissedSkip, a
	// schedule whose period is shorter than Refresh may lose its first ticks to that (under
	// MissedLatest, all but the newest). At least [MinPeriodicEvery]. Default 5 s
	// ([DefaultSchedulerRefresh]).
	Refresh time.Duration
	// Handles, when set, says whether a task kind has a handler: a fired task whose kind it
	// does not handle (or a payload that is no task envelope) is logged at Warn and counted
	// in SchedulerStats.UnknownKind. The job is enqueued all the same: another deployment may
	// handle the kind. Pass the queue's [Worker.Handles], so that a schedule no worker can
	// run is noticed where it fires.
	Handles func(kind string) bool
	// Logger receives the scheduler's warnings and errors. Default slog.Default().
	Logger *slog.Logger
}

// withDefaults fills the zero fields.
func (c SchedulerConfig) withDefaults() SchedulerConfig {
	c.Refresh = cmp.Or(c.Refresh, DefaultSchedulerRefresh)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// validate checks the fields; the error names the field.
func (c SchedulerConfig) validate() error {
	if err := keys.ValidateName(c.Queue); err != nil {
		return fmt.Errorf("%w: scheduler: Queue: %w", ErrInvalid, err)
	}
	if c.Refresh < MinPeriodicEvery {
		return fmt.Errorf("%w: scheduler: Refresh: %v is shorter than %v (MinPeriodicEvery): every refresh re-reads the queue's index", ErrInvalid, c.Refresh, MinPeriodicEvery)
	}
	return nil
}

// SchedulerStats counts what a [Scheduler] did since it was created.
type SchedulerStats struct {
	Passes      int64 // passes run: one read of the server's time and the rows, one batch of fires
	Fired       int64 // ticks this scheduler fired: a job was enqueued
	Skipped     int64 // due ticks this scheduler passed over by its policy: every one of a late pass under MissedSkip, those older than the ticks it fired under MissedLatest and MissedCatchUp
	Fenced      int64 // ticks another process fired or skipped first (or the schedule was paused meanwhile)
	UnknownKind int64 // fired tasks whose kind SchedulerConfig.Handles does not handle
	Errors      int64 // passes that failed, fires refused with an error, rows that do not decode
}

// Scheduler fires the periodic schedules of one queue (see [Bus.DeclarePeriodic]). Any number
// of processes may run one on the same queue, with no leader to elect: each pass reads the
// server's clock and the schedule rows in one round trip, computes each schedule's due ticks
// (ticks T with last < T <= now), and asks periodic_fire to fire each one, pipelined in one
// more round trip. The script enqueues only when the tick is newer than the schedule's last
// fired tick, so the tick is the fence: a tick fires exactly once however many schedulers see
// it, and a scheduler that crashes mid-pass costs nothing another one cannot redo. A tick's
// job id is [keys.JobIDAt] of the tick and of the queue, name and tick, so two fires of one
// tick could not even name two jobs.
//
// Between passes the scheduler sleeps until the earliest next tick of its schedules (the
// server's time carried onto a local timer by the offset measured at the pass) or the next
// refresh of the index, whichever comes first: it never polls.
//
// Missed ticks (no scheduler ran, or a pass came late) fire by the schedule's
// [MissedPolicy]: with n due ticks, MissedLatest fires the newest; MissedCatchUp fires the
// newest min(n, CatchUp), oldest first; MissedSkip fires the tick when n is 1 and otherwise
// skips to the newest without firing. Under MissedLatest and MissedSkip a pass delayed past
// the next tick therefore loses a tick by design; MissedCatchUp is the policy for "every tick
// matters".
//
// Cron schedules follow github.com/robfig/cron/v3 across daylight-saving changes, in Zone. A
// wall time that does not exist does not fire: on a spring-forward night in America/New_York,
// "30 2 * * *" skips that day (02:30 never happens) and "0 * * * *" fires 01:00 EST then 03:00
// EDT. A wall time that happens twice fires twice, since those are two instants: on a
// fall-back night "0 * * * *" fires 01:00 EDT and 01:00 EST, and so does a daily "30 1 * * *"
// (01:30 EDT and 01:30 EST). Declare such a schedule in UTC, or at a wall time outside 01:00
// to 02:59, to fire it exactly once a day everywhere. In a zone whose offset changes by half
// an hour (Australia/Lord_Howe) the same holds: on 2026-04-05 there (02:00 +11 back to 01:30
// +10:30), "45 1 * * *" fires twice (01:45 +11 and 01:45 +10:30) and "0 2 * * *" once, at
// 02:00 +10:30 (TestSchedulerHalfHourDST).
type Scheduler struct {
	b   *Bus
	cfg SchedulerConfig
	q   keys.Queue

	// serverNow, when set (tests), replaces the TIME of each pass.
	serverNow func(context.Context) (time.Time, error)

	mu      sync.Mutex
	started bool
	closed  bool
	cancel  context.CancelFunc
	done    chan struct{}

	// The pass's state; only the pass touches it.
	names     []string  // the index as last read
	refreshAt time.Time // local time of the next read of the index

	passes, fired, skipped, fenced, unknownKind, errs atomic.Int64
}

// NewScheduler returns a scheduler of cfg.Queue over b. It fires nothing until [Scheduler.Start].
func NewScheduler(b *Bus, cfg SchedulerConfig) (*Scheduler, error) {
	if b == nil {
		return nil, fmt.Errorf("%w: scheduler: nil Bus", ErrInvalid)
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	q, err := b.queue("scheduler", cfg.Queue)
	if err != nil {
		return nil, err
	}
	return &Scheduler{b: b, cfg: cfg, q: q}, nil
}

// Start runs the scheduler's loop in a goroutine of its own until [Scheduler.Close]. A
// scheduler starts once.
func (s *Scheduler) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return errors.New("bus: scheduler: Start after Close")
	case s.started:
		return errors.New("bus: scheduler: started twice")
	}
	s.started = true
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel, s.done = cancel, make(chan struct{})
	go s.run(ctx)
	return nil
}

// Close stops the loop and waits for its pass in flight, or for ctx. The fires a pass has
// sent are not cut short: their replies are read and counted in [Scheduler.Stats]. A fire
// that fails all the same (the connection broke) is safe: the next pass of any scheduler
// fires the tick or finds it fenced. Closing a scheduler that never started, or twice, is not
// an error.
func (s *Scheduler) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	cancel, done := s.cancel, s.done
	s.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("bus: scheduler close: %w", ctx.Err())
	}
}

// Stats is a snapshot of the scheduler's counters.
func (s *Scheduler) Stats() SchedulerStats {
	return SchedulerStats{
		Passes: s.passes.Load(), Fired: s.fired.Load(), Skipped: s.skipped.Load(),
		Fenced: s.fenced.Load(), UnknownKind: s.unknownKind.Load(), Errors: s.errs.Load(),
	}
}

func (s *Scheduler) run(ctx context.Context) {
	defer close(s.done)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		wait, err := s.pass(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			s.errs.Add(1)
			s.cfg.Logger.Error("bus: scheduler pass failed", "queue", s.cfg.Queue, "err", err)
			wait = min(schedulerRetry, s.cfg.Refresh)
		}
		timer.Reset(max(wait, time.Millisecond))
	}
}

// pass fires the due ticks of every schedule once and returns how long to sleep.
func (s *Scheduler) pass(ctx context.Context) (time.Duration, error) {
	s.passes.Add(1)
	if s.names == nil || !time.Now().Before(s.refreshAt) {
		names, err := s.b.periodicNames(ctx, s.q)
		if err != nil {
			return 0, fmt.Errorf("reading the index: %w", err)
		}
		s.names, s.refreshAt = names, time.Now().Add(s.cfg.Refresh)
	}
	rows, now, err := s.b.periodicRows(ctx, s.q, s.names, s.serverNow == nil)
	read := time.Now() // the server's now is at most this late
	if err != nil {
		return 0, fmt.Errorf("reading the schedules: %w", err)
	}
	if s.serverNow != nil {
		if now, err = s.serverNow(ctx); err != nil {
			return 0, err
		}
	}
	nowMs := now.UnixMilli()
	var runs []lua.Run
	var fires []fire
	next := int64(-1)
	failed := false  // a fire was not answered by the script
	ordered := false // a schedule has more than one run: they must apply in order
	for i := range rows {
		r := &rows[i]
		if r.err != nil {
			s.errs.Add(1)
			s.cfg.Logger.Error("bus: scheduler: a schedule row does not decode", "queue", s.cfg.Queue, "schedule", r.name, "err", r.err)
			continue
		}
		// A paused row fires nothing, but the scheduler still wakes at its next tick: a resume
		// meanwhile then fires that tick, where waiting for the refresh would pass over the
		// ticks between under MissedSkip and MissedLatest.
		if n := r.ticks.next(max(r.last, nowMs)); n >= 0 && (next < 0 || n < next) {
			next = n
		}
		if r.paused {
			continue
		}
		due, skip, dropped := r.ticks.plan(r.last, nowMs)
		for i, tick := range due {
			f := fire{row: r, tick: tick}
			if i == 0 {
				f.passed = dropped // counted as skipped once the oldest tick fired
			}
			runs = append(runs, s.fireRun(r.name, tick, false))
			fires = append(fires, f)
		}
		if skip > 0 {
			runs = append(runs, s.fireRun(r.name, skip, true))
			fires = append(fires, fire{row: r, tick: skip, skip: true, passed: dropped})
		}
		ordered = ordered || len(due) > 1
	}
	if len(runs) > 0 {
		// Close does not cut the fires short: a fire that reached the server is answered and
		// counted, so the stats match the jobs enqueued.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), schedulerFireTimeout)
		// A schedule's ticks go oldest first, each fenced by the one before (periodic_fire
		// refuses a tick at or before last): by EVAL, so that none is answered NOSCRIPT and
		// sent again after a newer one fired (lua.Ordered), which would lose it for good.
		var replies []valkey.ValkeyResult
		if ordered {
			replies = lua.Ordered(fctx, s.b.client, runs)
		} else {
			replies, _ = lua.Pipeline(fctx, s.b.client, runs, nil)
		}
		cancel()
		for i, res := range results(replies) {
			s.fired1(fires[i], res)
			failed = failed || transient(res.err)
		}
	}
	wait := time.Until(s.refreshAt)
	if next >= 0 {
		wait = min(wait, time.Duration(next-nowMs)*time.Millisecond-time.Since(read))
	}
	if failed {
		// A fire the server did not apply (a broken connection, OOM, a failover) is tried again
		// soon, as a failed pass is: waiting for the next tick would lose this one under
		// MissedLatest and MissedSkip.
		wait = min(wait, schedulerRetry, s.cfg.Refresh)
	}
	return wait, nil
}

// fire is one tick a pass asked to fire or skip.
type fire struct {
	row    *periodicRowData
	tick   int64
	skip   bool
	passed int64 // the due ticks the policy passes over with this one (Stats.Skipped)
}

// fireRun is the periodic_fire call of one tick of schedule name: a fire, or a skip.
func (s *Scheduler) fireRun(name string, tick int64, skip bool) lua.Run {
	row, _ := s.q.Periodic(name) // the rows read are of valid names only
	t := strconv.FormatInt(tick, 10)
	id := keys.JobIDAt(tick, []byte(s.cfg.Queue+"\x00"+name+"\x00"+t))
	flag := "1" // periodic_fire's ARGV[3]: 1 fires, 0 skips
	if skip {
		flag = "0"
	}
	return lua.Run{Script: scPeriodicFire, Keys: []string{row, s.q.Pending(), s.q.Meta(), s.q.Wake()}, Args: []string{t, id.String(), flag}}
}

// fired1 counts and logs one fire's reply.
func (s *Scheduler) fired1(f fire, res result) {
	log := s.cfg.Logger
	if res.err != nil {
		err := periodicError("fire periodic", s.cfg.Queue, f.row.name, res.err)
		if errors.Is(err, ErrNoSchedule) {
			return // removed since the read
		}
		s.errs.Add(1)
		log.Error("bus: scheduler: firing a tick failed", "queue", s.cfg.Queue, "schedule", f.row.name, "tick", time.UnixMilli(f.tick), "err", err)
		return
	}
	n, err := res.msg.AsInt64()
	switch {
	case err != nil || n < 0 || n > 2:
		s.errs.Add(1)
		log.Error("bus: scheduler: unexpected reply", "queue", s.cfg.Queue, "schedule", f.row.name, "reply", res.msg.String())
	case n == 0:
		s.fenced.Add(1)
	case n == 2:
		s.skipped.Add(f.passed)
	default:
		s.fired.Add(1)
		s.skipped.Add(f.passed)
		if s.cfg.Handles == nil {
			return
		}
		if kind, _, err := ParseEnvelope(f.row.payload); err != nil || !s.cfg.Handles(kind) {
			s.unknownKind.Add(1)
			log.Warn("bus: scheduler fired a task no handler here knows", "queue", s.cfg.Queue, "schedule", f.row.name, "kind", kind)
		}
	}
}
