package bus

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"time"

	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
)

// The worker's reporter: one goroutine per started worker, apart from the loop, that lists the
// queue in the registry and publishes the worker's [WorkerStats] to emq:{<q>}:workers every
// StatsInterval for tools in other processes ([Bus.WorkerStats]). It withdraws the snapshot
// when the worker has stopped. It never touches the loop's state: it reads the counters the
// loop keeps in atomics, as [Worker.Stats] does.

// Defaults and bounds of the stats a worker publishes.
const (
	// DefaultStatsInterval is how often a worker publishes its stats.
	DefaultStatsInterval = 5 * time.Second
	// MinStatsInterval and MaxStatsInterval bound WorkerConfig.StatsInterval (and
	// cache.Config.StatsInterval): a snapshot lives 3 intervals, at most the 24 h a report
	// script accepts.
	MinStatsInterval = 10 * time.Millisecond
	MaxStatsInterval = 8 * time.Hour
	// statsLives is how many intervals a snapshot stays live: a worker that misses two reports
	// (a slow round trip, a pause) is not taken for dead.
	statsLives = 3
	// statsPrune is how many other fields each report checks for expiry.
	statsPrune = 16
	// reportTimeout bounds one report's round trip.
	reportTimeout = 2 * time.Second
)

var (
	scWorkersReport = lua.Get("workers_report")
	scWorkersRead   = lua.Get("workers_read")
)

// withReportDefaults fills the fields of WorkerConfig the reporter and the middleware read.
func (c WorkerConfig) withReportDefaults() WorkerConfig {
	if c.ID == "" {
		c.ID = defaultReporterID()
	}
	c.StatsInterval = cmp.Or(c.StatsInterval, DefaultStatsInterval)
	return c
}

// validateReport checks those fields, and the middleware, naming the field.
func (c WorkerConfig) validateReport(where string) error {
	if err := keys.ValidateID(c.ID); err != nil {
		return invalid(where+": ID", err)
	}
	if c.StatsInterval > 0 && (c.StatsInterval < MinStatsInterval || c.StatsInterval > MaxStatsInterval) {
		return fmt.Errorf("%w: %s: StatsInterval %v is not between %v and %v (negative: never)", ErrInvalid, where, c.StatsInterval, MinStatsInterval, MaxStatsInterval)
	}
	for i, m := range c.Middleware {
		if m == nil {
			return fmt.Errorf("%w: %s: Middleware[%d] is nil", ErrInvalid, where, i)
		}
	}
	return nil
}

// defaultReporterID is a worker's or a cache's id when its config names none:
// <host>-<pid>-<8 random hex>, unique per object.
func defaultReporterID() string {
	host, err := os.Hostname()
	if err != nil || keys.ValidateID(host) != nil || len(host) > 256 {
		host = "host"
	}
	return fmt.Sprintf("%s-%d-%08x", host, os.Getpid(), rand.Uint32())
}

// workerSnapshot is what a worker publishes: FORMAT workerstats of lua/workers_report.lua.
type workerSnapshot struct {
	V           int      `json:"v"`
	EveryMS     int64    `json:"every_ms"`
	StartedMS   int64    `json:"started_ms"`
	Concurrency int      `json:"concurrency"`
	Kinds       []string `json:"kinds"`
	Running     int      `json:"running"`
	Claimed     int64    `json:"claimed"`
	Completed   int64    `json:"completed"`
	Failed      int64    `json:"failed"`
	Retried     int64    `json:"retried"`
	Dead        int64    `json:"dead"`
	Snoozed     int64    `json:"snoozed"`
	HandedBack  int64    `json:"handed_back"`
	Stale       int64    `json:"stale"`
	LeaseLost   int64    `json:"lease_lost"`
	Cancelled   int64    `json:"cancelled"`
	RateLimited int64    `json:"rate_limited"`
	RoundTrips  int64    `json:"round_trips"`
	RoundTripUS int64    `json:"round_trip_us"`
	Prefetch    int      `json:"prefetch"`
	// At and Exp are written by the script (FORMAT report); a publisher never sends them.
	At  int64 `json:"at,omitempty"`
	Exp int64 `json:"exp,omitempty"`
}

// reporter is a started worker's reporting goroutine.
type reporter struct {
	w       *Worker
	started time.Time
	kinds   []string
	quit    chan struct{} // closed when the worker's loop and handlers have ended
	done    chan struct{} // closed when the reporter has withdrawn its snapshot and ended
}

// startReporter starts w's reporter; w's handlers are registered (Start holds w.mu).
func (w *Worker) startReporter() *reporter {
	r := &reporter{w: w, started: time.Now(), quit: make(chan struct{}), done: make(chan struct{})}
	for kind := range w.handlers {
		r.kinds = append(r.kinds, kind)
	}
	sort.Strings(r.kinds)
	go r.run()
	return r
}

// stop ends the reporter and waits for it: the worker has stopped, its snapshot goes.
func (r *reporter) stop() {
	close(r.quit)
	<-r.done
}

func (r *reporter) run() {
	defer close(r.done)
	w := r.w
	every := w.cfg.StatsInterval
	listed, published := false, false
	// Without stats the reporter only lists the queue, retrying on the housekeeping timer.
	retry := every
	if every < 0 {
		retry = max(w.cfg.HousekeepInterval, DefaultHousekeepInterval)
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-r.quit:
			if published {
				// Close's hand-back bound cuts the withdrawal short, or skips it once passed:
				// the snapshot then expires by itself.
				if ctx, cancel, ok := w.reportCtx(); ok {
					if err := r.send(ctx, nil); err != nil {
						w.log.Warn("bus: worker: withdrawing its stats failed; they expire by themselves", "err", err)
					}
					cancel()
				}
			}
			return
		case <-timer.C:
		}
		// Close's hand-back bound cuts a report in flight too: one that began while Close
		// waits for the handlers must not hold Close past that bound.
		ctx, cancel, ok := w.reportCtx()
		if !ok {
			continue // past the bound: the next select takes quit
		}
		// Listed at every report, which list's memo makes one ZADD per relist interval: an
		// entry lost meanwhile (a forced failover to a replica that had not seen it, an
		// operator's ZREM) comes back while the worker runs, producer or not.
		if err := w.b.list(ctx, w.q.Name()); err != nil {
			w.log.Warn("bus: worker: listing the queue in the registry failed; trying again", "err", err)
			listed = false
		} else {
			listed = true
		}
		if every > 0 {
			if err := r.send(ctx, r.snapshot()); err != nil {
				w.log.Warn("bus: worker: publishing its stats failed", "err", err)
			} else {
				published = true
			}
		}
		cancel()
		if listed && every < 0 {
			timer.Reset(cmp.Or(w.b.reg.every, relistEvery))
			continue
		}
		timer.Reset(retry)
	}
}

// snapshot is the worker's counters now, in FORMAT workerstats.
func (r *reporter) snapshot() *workerSnapshot {
	w, s := r.w, r.w.Stats()
	return &workerSnapshot{
		V: 1, EveryMS: msCeil(w.cfg.StatsInterval), StartedMS: r.started.UnixMilli(),
		Concurrency: w.cfg.Concurrency, Kinds: r.kinds, Running: s.Running,
		Claimed: s.Claimed, Completed: s.Completed, Failed: s.Failed, Retried: s.Retried, Dead: s.Dead,
		Snoozed: s.Snoozed, HandedBack: s.HandedBack, Stale: s.Stale, LeaseLost: s.LeaseLost, Cancelled: s.Cancelled,
		RateLimited: s.RateLimited, RoundTrips: s.RoundTrips, RoundTripUS: s.RoundTripTime.Microseconds(),
		Prefetch: s.Prefetch,
	}
}

// send publishes snap, or withdraws the worker's field when snap is nil.
func (r *reporter) send(ctx context.Context, snap *workerSnapshot) error {
	w := r.w
	body := []byte{}
	if snap != nil {
		var err error
		if body, err = json.Marshal(snap); err != nil {
			return err
		}
	}
	ttl := msCeil(statsLives * w.cfg.StatsInterval)
	args := []string{w.cfg.ID, string(body), itoa(ttl), itoa(statsPrune)}
	_, err := w.b.exec(ctx, lua.Run{Script: scWorkersReport, Keys: []string{w.q.Workers()}, Args: args}, nil)
	return errorFor(call{op: "report stats", queue: w.q.Name()}, err)
}

// reportCtx bounds one report: reportTimeout, and Close's hand-back bound once its deadline
// passed. The bound is the context's deadline, not only hardCtx's cancel: valkey-go reads the
// handshake of a connection it dials by the context's deadline and does not watch a cancel
// (a withdrawal that dialed once held Close 2 s past the bound). ok is false when the bound
// has passed: nothing is sent.
func (w *Worker) reportCtx() (ctx context.Context, cancel context.CancelFunc, ok bool) {
	now := time.Now()
	deadline := w.hardBound(now.Add(reportTimeout))
	if !deadline.After(now) {
		return nil, nil, false
	}
	ctx, cancel = context.WithDeadline(w.hardCtx, deadline)
	return ctx, cancel, true
}

// hardBound is deadline, or the moment Close cancels hardCtx when Close's deadline passed and
// that comes first: the cancel as a deadline too (see reportCtx).
func (w *Worker) hardBound(deadline time.Time) time.Time {
	if at := w.hardAt.Load(); at != 0 && time.Unix(0, at).Before(deadline) {
		return time.Unix(0, at)
	}
	return deadline
}
