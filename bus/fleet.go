package bus

import (
	"context"
	"encoding/json"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/lua"
)

// The reading side of the stats workers publish (worker_report.go): what a tool in another
// process shows as a queue's fleet.

// maxReports bounds how many workers' snapshots one [Bus.WorkerStats] reads.
const maxReports = 1000

// WorkerReport is one worker's published stats, as [Bus.WorkerStats] reads them.
type WorkerReport struct {
	// ID is the worker's WorkerConfig.ID.
	ID string
	// At is when the worker published the snapshot, by the server's clock; it stays live
	// until Expires (3 of the worker's report intervals later).
	At, Expires time.Time
	// Every is the worker's StatsInterval; Started, when it started, by its own clock.
	Every   time.Duration
	Started time.Time
	// Concurrency is the worker's WorkerConfig.Concurrency; Kinds, the kinds it handles.
	Concurrency int
	Kinds       []string
	// Stats are its counters since it started (Stats.Queue is the queue).
	Stats WorkerStats
}

// FleetStats are the published stats of a queue's live workers, read in one atomic snapshot.
type FleetStats struct {
	Queue string
	// At is the server's clock at the read.
	At time.Time
	// Workers are the live workers' reports, by ID.
	Workers []WorkerReport
	// Total sums the counters of Workers (Running included); Concurrency sums theirs.
	Total       WorkerStats
	Concurrency int
	// Partial is true when the queue's hash held more snapshots than one read takes (1000):
	// Workers is a random sample of them.
	Partial bool
}

// WorkerStats reads the stats that queue's workers publish (see WorkerConfig.StatsInterval),
// in any process, and sums them: the fleet-wide counters a tool shows. Only live snapshots
// count, judged by the server's clock: a worker that stopped withdrew its own, and one that
// died drops out within 3 of its report intervals. So the sums are of the workers that run
// now, and a total can go down when one leaves; a rate is better taken per worker
// ([FleetStats.Rates]). Snapshots that do not decode (a foreign publisher's) are left out.
func (b *Bus) WorkerStats(ctx context.Context, queue string) (FleetStats, error) {
	const op = "worker stats"
	q, err := b.queue(op, queue)
	if err != nil {
		return FleetStats{}, err
	}
	msg, err := b.exec(ctx, lua.Run{Script: scWorkersRead, Keys: []string{q.Workers()}, Args: []string{itoa(maxReports)}}, nil)
	if err != nil {
		return FleetStats{}, errorFor(call{op: op, queue: queue}, err)
	}
	return workerStatsReply(queue, msg)
}

// workerStatsReply decodes a workers_read reply {now_ms, fields, id, snapshot, ...}.
func workerStatsReply(queue string, msg valkey.ValkeyMessage) (FleetStats, error) {
	const op = "worker stats"
	arr, err := msg.ToArray()
	if err != nil || len(arr) < 2 || len(arr)%2 != 0 {
		return FleetStats{}, protocolError(op, "reply %v", msg)
	}
	now, err1 := arr[0].AsInt64()
	n, err2 := arr[1].AsInt64()
	if err1 != nil || err2 != nil {
		return FleetStats{}, protocolError(op, "reply %v", msg)
	}
	fs := FleetStats{Queue: queue, At: time.UnixMilli(now), Total: WorkerStats{Queue: queue}}
	for i := 2; i < len(arr); i += 2 {
		id, err1 := arr[i].ToString()
		raw, err2 := arr[i+1].AsBytes()
		var s workerSnapshot
		if err1 != nil || err2 != nil || json.Unmarshal(raw, &s) != nil {
			continue
		}
		r := WorkerReport{
			ID: id, At: time.UnixMilli(s.At), Expires: time.UnixMilli(s.Exp),
			Every: time.Duration(s.EveryMS) * time.Millisecond, Started: time.UnixMilli(s.StartedMS),
			Concurrency: s.Concurrency, Kinds: s.Kinds,
			Stats: WorkerStats{
				Queue: queue, Running: s.Running, Claimed: s.Claimed, Completed: s.Completed,
				Failed: s.Failed, Retried: s.Retried, Dead: s.Dead, Snoozed: s.Snoozed,
				HandedBack: s.HandedBack, Stale: s.Stale, LeaseLost: s.LeaseLost, Cancelled: s.Cancelled,
				RateLimited: s.RateLimited,
				RoundTrips:  s.RoundTrips, RoundTripTime: time.Duration(s.RoundTripUS) * time.Microsecond,
				Prefetch: s.Prefetch,
			},
		}
		fs.Workers = append(fs.Workers, r)
		fs.Concurrency += r.Concurrency
		fs.Total = fs.Total.add(r.Stats)
	}
	fs.Partial = n > maxReports
	return fs, nil
}

// add is s with o's counters added.
func (s WorkerStats) add(o WorkerStats) WorkerStats {
	s.Running += o.Running
	s.Claimed += o.Claimed
	s.Completed += o.Completed
	s.Failed += o.Failed
	s.Retried += o.Retried
	s.Dead += o.Dead
	s.Snoozed += o.Snoozed
	s.HandedBack += o.HandedBack
	s.Stale += o.Stale
	s.LeaseLost += o.LeaseLost
	s.Cancelled += o.Cancelled
	s.RateLimited += o.RateLimited
	s.RoundTrips += o.RoundTrips
	s.RoundTripTime += o.RoundTripTime
	s.Prefetch += o.Prefetch
	return s
}

// WorkerRates are a fleet's counters per second between two reads ([FleetStats.Rates]).
type WorkerRates struct {
	Claimed, Completed, Failed, Retried, Dead, Snoozed, HandedBack, Stale, LeaseLost, Cancelled, RateLimited float64
	// Workers is how many workers the rates cover: those in both reads, with a newer
	// snapshot in the later one, the same Started and no counter that went down (a worker id
	// restarted).
	Workers int
}

// Rates is the fleet's rate between prev, an earlier read of the same queue, and s: for each
// worker in both reads, the growth of its counters over the time between its two snapshots
// (their At, by the server's clock), summed over the workers. A worker that joined or left
// between the reads counts in neither, so the rates do not jump when the fleet changes.
func (s FleetStats) Rates(prev FleetStats) WorkerRates {
	before := make(map[string]WorkerReport, len(prev.Workers))
	for _, r := range prev.Workers {
		before[r.ID] = r
	}
	var out WorkerRates
	for _, r := range s.Workers {
		p, ok := before[r.ID]
		dt := r.At.Sub(p.At).Seconds()
		if !ok || dt <= 0 || !r.Started.Equal(p.Started) { // a restart: counters from zero again
			continue
		}
		a, b := p.Stats, r.Stats
		d := []int64{b.Claimed - a.Claimed, b.Completed - a.Completed, b.Failed - a.Failed, b.Retried - a.Retried,
			b.Dead - a.Dead, b.Snoozed - a.Snoozed, b.HandedBack - a.HandedBack, b.Stale - a.Stale, b.LeaseLost - a.LeaseLost,
			b.Cancelled - a.Cancelled, b.RateLimited - a.RateLimited}
		reset := false
		for _, x := range d {
			reset = reset || x < 0
		}
		if reset {
			continue
		}
		out.Workers++
		out.Claimed += float64(d[0]) / dt
		out.Completed += float64(d[1]) / dt
		out.Failed += float64(d[2]) / dt
		out.Retried += float64(d[3]) / dt
		out.Dead += float64(d[4]) / dt
		out.Snoozed += float64(d[5]) / dt
		out.HandedBack += float64(d[6]) / dt
		out.Stale += float64(d[7]) / dt
		out.LeaseLost += float64(d[8]) / dt
		out.Cancelled += float64(d[9]) / dt
		out.RateLimited += float64(d[10]) / dt
	}
	return out
}
