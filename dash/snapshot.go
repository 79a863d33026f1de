package dash

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/lua"
)

// The one read behind the overview and the live refresh: the counts of every queue and the
// published stats of every table asked for, in ONE pipelined round trip (one EVALSHA each,
// per node on a cluster), whatever their number. Throughput comes from the sampler's rings,
// read from memory.

// queueRow is one queue's line of the overview.
type queueRow struct {
	Name   string         `json:"name"`
	Counts bus.Counts     `json:"counts"`
	Err    string         `json:"err,omitempty"`
	Tput   throughputView `json:"throughput"`
}

// throughputView is a queue's newest sample and its sparkline.
type throughputView struct {
	Completed float64 `json:"completed"` // per second, newest sample
	Failed    float64 `json:"failed"`
	Workers   int     `json:"workers"`
	Running   int     `json:"running"`
	Samples   int     `json:"samples"`
	Spark     string  `json:"spark"` // SVG polyline points of completed/s, 0..100 x 0..24
	Max       float64 `json:"max"`   // the sparkline's top
}

// tableRow is one table's line of the overview.
type tableRow struct {
	Name       string        `json:"name"`
	Caches     int           `json:"caches"`
	Reads      int64         `json:"reads"`
	L1, L2     float64       `json:"-"` // shares of reads
	Miss       float64       `json:"-"`
	L1Pct      string        `json:"l1"`
	L2Pct      string        `json:"l2"`
	MissPct    string        `json:"miss"`
	Loads      int64         `json:"loads"`
	LoadErrors int64         `json:"loadErrors"`
	InvSent    int64         `json:"invalidationsSent"`
	InvRecv    int64         `json:"invalidationsReceived"`
	Flushes    int64         `json:"flushes"`
	PropMean   time.Duration `json:"-"`
	PropMax    time.Duration `json:"-"`
	Prop       string        `json:"propagation"`
	Degraded   int           `json:"degraded"`
	Err        string        `json:"err,omitempty"`

	fleet cache.FleetStats
}

// snapshot reads queues' counts and tables' stats in one pipelined round trip. Names that
// are not valid are reported in their row's Err and not sent.
func (d *Dashboard) snapshot(ctx context.Context, queues, tables []string) ([]queueRow, []tableRow) {
	runs := make([]lua.Run, 0, len(queues)+len(tables))
	qrows := make([]queueRow, len(queues))
	trows := make([]tableRow, len(tables))
	qi := make([]int, len(queues)) // index in runs, -1 when not sent
	ti := make([]int, len(tables))
	for i, name := range queues {
		qrows[i].Name, qi[i] = name, -1
		if run, err := bus.CountsRun(name); err != nil {
			qrows[i].Err = err.Error()
		} else {
			qi[i] = len(runs)
			runs = append(runs, run)
		}
	}
	for i, name := range tables {
		trows[i].Name, ti[i] = name, -1
		if run, err := cache.StatsRun(name); err != nil {
			trows[i].Err = err.Error()
		} else {
			ti[i] = len(runs)
			runs = append(runs, run)
		}
	}
	var replies []valkey.ValkeyResult
	if len(runs) > 0 {
		replies, _ = lua.Pipeline(ctx, d.client, runs, nil)
	}
	for i := range qrows {
		row := &qrows[i]
		if qi[i] >= 0 {
			c, err := bus.DecodeCounts(row.Name, replies[qi[i]])
			if err != nil {
				row.Err = err.Error()
			}
			row.Counts = c
		}
		row.Tput = throughput(d.sampler.series(row.Name))
	}
	for i := range trows {
		row := &trows[i]
		if ti[i] >= 0 {
			fs, err := cache.DecodeStats(row.Name, replies[ti[i]])
			if err != nil {
				row.Err = err.Error()
			}
			row.fill(fs)
		}
	}
	return qrows, trows
}

// fill sets the row's figures from the table's fleet stats.
func (row *tableRow) fill(fs cache.FleetStats) {
	s := fs.Total
	row.fleet = fs
	row.Caches = len(fs.Caches)
	row.Reads = s.L1Hits + s.L2Hits + s.Misses
	if row.Reads > 0 {
		row.L1 = float64(s.L1Hits) / float64(row.Reads)
		row.L2 = float64(s.L2Hits) / float64(row.Reads)
		row.Miss = float64(s.Misses) / float64(row.Reads)
	}
	row.L1Pct, row.L2Pct, row.MissPct = share(row.L1), share(row.L2), share(row.Miss)
	row.Loads, row.LoadErrors = s.Loads, s.LoadErrors
	row.InvSent, row.InvRecv, row.Flushes = s.InvalidationsSent, s.InvalidationsReceived, s.Flushes
	if s.PropagationCount > 0 {
		row.PropMean = s.PropagationTotal / time.Duration(s.PropagationCount)
	}
	row.PropMax = s.PropagationMax
	row.Prop = "—"
	if s.PropagationCount > 0 {
		row.Prop = dur(row.PropMean) + " mean, " + dur(row.PropMax) + " max"
	}
	row.Degraded = fs.Degraded
}

func share(f float64) string { return strconv.FormatFloat(100*f, 'f', 1, 64) + "%" }

// throughput is the view of a queue's samples.
func throughput(ss []sample) throughputView {
	var v throughputView
	v.Samples = len(ss)
	if len(ss) == 0 {
		return v
	}
	last := ss[len(ss)-1]
	v.Completed, v.Failed, v.Workers, v.Running = last.Completed, last.Failed, last.Workers, last.Running
	for _, s := range ss {
		v.Max = max(v.Max, s.Completed, s.Failed)
	}
	v.Spark = spark(ss, v.Max)
	return v
}

// spark is the SVG polyline points of the samples' completed/s, in a 100 x 24 box.
func spark(ss []sample, top float64) string {
	if len(ss) < 2 {
		return ""
	}
	var b strings.Builder
	for i, s := range ss {
		x := 100 * float64(i) / float64(len(ss)-1)
		y := 23.0
		if top > 0 {
			y = 23 - 22*s.Completed/top
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.FormatFloat(x, 'f', 1, 64))
		b.WriteByte(',')
		b.WriteString(strconv.FormatFloat(y, 'f', 1, 64))
	}
	return b.String()
}
