package cache

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
)

// The reading side of the stats caches publish (publish.go): what a tool in another process
// shows for one table across every process that declared it.

// maxReports bounds how many caches' snapshots one [ReadStats] reads.
const maxReports = 1000

// CacheReport is one cache's published stats of a table, as [ReadStats] reads them.
type CacheReport struct {
	// ID is the publishing Cache's Config.ID.
	ID string
	// At is when it published the snapshot, by the server's clock; it stays live until
	// Expires (3 of its report intervals later). Every is its Config.StatsInterval.
	At, Expires time.Time
	Every       time.Duration
	// Stats are its counters of the table since the table was declared, and its state.
	Stats Stats
}

// FleetStats are the published stats of one table from every live cache that declared it,
// read in one atomic snapshot.
type FleetStats struct {
	Table string
	// At is the server's clock at the read.
	At time.Time
	// Caches are the live caches' reports, by ID.
	Caches []CacheReport
	// Total sums the counters of Caches. Its state fields combine them: Degraded is true and
	// DegradedSince the earliest when any cache is degraded; PropagationMax is the largest;
	// PropagationHistogram is the caches' histograms summed bucket by bucket, and
	// PropagationP50 and PropagationP99 are read from it;
	// PendingInvalidations is -1 when any cache owes a whole-table invalidation, else the
	// sum.
	Total Stats
	// Degraded counts the caches in degraded mode.
	Degraded int
	// Partial is true when the table's hash held more snapshots than one read takes (1000):
	// Caches is a random sample of them.
	Partial bool
}

// ReadStats reads the stats that every Cache which declared table publishes (see
// Config.StatsInterval), in any process, and sums them. Only live snapshots count, judged by
// the server's clock: a Cache that closed withdrew its own, and one that died drops out
// within 3 of its report intervals, so a total can go down when one leaves. Snapshots that do
// not decode (a foreign publisher's) are left out. It needs no Cache: tools call it with
// their own client.
func ReadStats(ctx context.Context, client valkey.Client, table string) (FleetStats, error) {
	if client == nil {
		return FleetStats{}, fmt.Errorf("%w: ReadStats: nil valkey client", ErrInvalid)
	}
	run, err := StatsRun(table)
	if err != nil {
		return FleetStats{}, err
	}
	return DecodeStats(table, scriptStatsRead.Exec(ctx, client, run.Keys, run.Args))
}

// StatsRun is the script call [ReadStats] sends for table, for a tool that pipelines the
// reads of many tables (and of queues: see bus.CountsRun) in one round trip with
// lua.Pipeline; [DecodeStats] reads its reply.
func StatsRun(table string) (lua.Run, error) {
	tk, err := keys.NewTable(table)
	if err != nil {
		return lua.Run{}, fmt.Errorf("%w: ReadStats: %w", ErrInvalid, err)
	}
	return lua.Run{Script: scriptStatsRead, Keys: []string{tk.Stats()}, Args: []string{fmt.Sprint(maxReports)}}, nil
}

// DecodeStats reads the reply of a [StatsRun] of table.
func DecodeStats(table string, reply valkey.ValkeyResult) (FleetStats, error) {
	msg, err := reply.ToMessage()
	if err != nil {
		return FleetStats{}, fmt.Errorf("cache: reading the stats of table %s: %w", table, err)
	}
	arr, err := msg.ToArray()
	bad := func() (FleetStats, error) {
		return FleetStats{}, fmt.Errorf("cache: reading the stats of table %s: %s answered %v", table, scriptStatsRead.Name, msg)
	}
	if err != nil || len(arr) < 2 || len(arr)%2 != 0 {
		return bad()
	}
	now, err1 := arr[0].AsInt64()
	n, err2 := arr[1].AsInt64()
	if err1 != nil || err2 != nil {
		return bad()
	}
	fs := FleetStats{Table: table, At: time.UnixMilli(now), Partial: n > maxReports}
	for i := 2; i < len(arr); i += 2 {
		id, err1 := arr[i].ToString()
		raw, err2 := arr[i+1].AsBytes()
		var s tableSnapshot
		if err1 != nil || err2 != nil || json.Unmarshal(raw, &s) != nil {
			continue
		}
		r := CacheReport{ID: id, At: time.UnixMilli(s.At), Expires: time.UnixMilli(s.Exp),
			Every: time.Duration(s.EveryMS) * time.Millisecond, Stats: s.stats()}
		fs.Caches = append(fs.Caches, r)
		if r.Stats.Degraded {
			fs.Degraded++
		}
		fs.Total = fs.Total.add(r.Stats)
	}
	return fs, nil
}

// add is s with o's counters added and o's state combined (see FleetStats.Total).
func (s Stats) add(o Stats) Stats {
	s.L1Hits += o.L1Hits
	s.L2Hits += o.L2Hits
	s.Misses += o.Misses
	s.Loads += o.Loads
	s.LoadErrors += o.LoadErrors
	s.LoadTime += o.LoadTime
	s.FillsRefused += o.FillsRefused
	s.SetsRefused += o.SetsRefused
	s.InstallsRefused += o.InstallsRefused
	s.CorruptRows += o.CorruptRows
	s.EarlyRefreshes += o.EarlyRefreshes
	s.LeaseWaits += o.LeaseWaits
	s.LeaseTakeovers += o.LeaseTakeovers
	s.StaleServed += o.StaleServed
	s.DegradedLoads += o.DegradedLoads
	s.BreakerOpens += o.BreakerOpens
	s.InvalidationsSent += o.InvalidationsSent
	s.InvalidationsReceived += o.InvalidationsReceived
	s.Gaps += o.Gaps
	s.Regressions += o.Regressions
	s.Flushes += o.Flushes
	s.Reconciles += o.Reconciles
	s.PropagationCount += o.PropagationCount
	s.PropagationTotal += o.PropagationTotal
	s.PropagationMax = max(s.PropagationMax, o.PropagationMax)
	s.PropagationHistogram = mergeHistograms(s.PropagationHistogram, o.PropagationHistogram)
	s.PropagationP50 = histogramQuantile(s.PropagationHistogram, 0.5)
	s.PropagationP99 = histogramQuantile(s.PropagationHistogram, 0.99)
	if o.Degraded {
		if !s.Degraded || o.DegradedSince.Before(s.DegradedSince) {
			s.DegradedSince = o.DegradedSince
		}
		s.Degraded = true
	}
	switch {
	case s.PendingInvalidations < 0 || o.PendingInvalidations < 0:
		s.PendingInvalidations = -1
	default:
		s.PendingInvalidations += o.PendingInvalidations
	}
	return s
}
