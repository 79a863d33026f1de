package bus_test

import (
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"
	"pgregory.net/rapid"

	"github.com/echocache/echocache/bus"
)

// The protocol model with lanes (TestProtocolModel/lanes): the plain model's verbs on jobs
// that may carry a lane (a, b, c or none) and a priority, beside lane limits that a check draws
// (a cap on a, a weight of 2 on b, a rate of one claim an hour with a burst of 1 or 2 on c),
// pauses, cap changes and RateLimited hand-backs. The Go model computes what laneclaim must
// claim (urgent first, then round robin by virtual time: FORMAT lanes) and every lane key the
// scripts keep, and after every step compares the server's whole queue with it: rows, sets,
// joblane, the lanes' sets, laneready with its scores, lanewait, laneactive, flow. Invariants
// are checked besides: a claim never takes a job of a lane at its cap, nor more of a rated
// lane than its rate allows, nor a job of priority 0 while an urgent job of a lane that could
// give it waits; laneactive's count of each lane equals the number of its jobs in active; and
// no lane in laneready is more than one turn (32 / weight) ahead of the virtual clock.

type lJob struct {
	mJob
	lane    string
	prio    int
	refunds int64
	stamped bool // has a joblane field
}

// lHold is a lane held back: for an hour (never ends within a check) or 5 ms.
type lHold struct {
	short, past bool
}

func (h lHold) active() bool { return !h.short || !h.past }

type lModel struct {
	modelCore
	jobs map[string]*lJob

	caps    map[string]int // own caps (0: none)
	weights map[string]float64
	burst   int // c's burst; c's rate is one claim an hour
	paused  map[string]bool
	ready   map[string]float64 // laneready
	waits   map[string]lHold   // lanewait
	hold    *lHold             // flow's hold of the stream without a lane
	vt      float64            // flow's vt; 0: absent
	active  map[string]int     // laneactive
	grants  int                // claims of c counted by its rate
}

var laneModelLanes = []string{"", "", "a", "b", "c"}

func (m *lModel) weight(l string) float64 {
	if w, ok := m.weights[l]; ok {
		return w
	}
	return 1
}

func (m *lModel) in(s mState) []*lJob {
	var out []*lJob
	for _, id := range m.order {
		if j := m.jobs[id]; j.state == s {
			out = append(out, j)
		}
	}
	return out
}

// waiting are the jobs waiting in lane's set (priority 0), in mint order.
func (m *lModel) waiting(lane string) []*lJob {
	var out []*lJob
	for _, j := range m.in(mPending) {
		if j.lane == lane && j.prio == 0 {
			out = append(out, j)
		}
	}
	sort.Slice(out, func(i, k int) bool { return out[i].id < out[k].id })
	return out
}

// urgent are the waiting jobs of priority 1 to 3, in urgent's order.
func (m *lModel) urgent() []*lJob {
	var out []*lJob
	for _, j := range m.in(mPending) {
		if j.prio > 0 {
			out = append(out, j)
		}
	}
	sort.Slice(out, func(i, k int) bool {
		if out[i].prio != out[k].prio {
			return out[i].prio > out[k].prio
		}
		return out[i].id < out[k].id
	})
	return out
}

func (m *lModel) laneWaiting() int {
	n := 0
	for _, j := range m.in(mPending) {
		if j.lane != "" && j.prio == 0 {
			n++
		}
	}
	return n
}

func (m *lModel) joblane() bool {
	for _, j := range m.jobs {
		if j.stamped && j.state != mGone {
			return true
		}
	}
	return false
}

// flow reports whether the flow hash exists: its fields waiting, vt, hold.
func (m *lModel) flow() bool { return m.laneWaiting() > 0 || m.vt != 0 || m.hold != nil }

// join is tolane's and free's ZADD of a lane into laneready at vt.
func (m *lModel) join(lane string, nx bool) {
	if _, ok := m.ready[lane]; ok && nx {
		return
	}
	m.ready[lane] = m.vt
}

// toWaiting makes j wait again in its set (tolane, or pending).
func (m *lModel) toWaiting(j *lJob) {
	j.state = mPending
	if j.stamped && j.prio == 0 && j.lane != "" {
		if _, held := m.waits[j.lane]; !held {
			m.join(j.lane, true)
		}
	}
}

// leave frees j's lane's slot; free re-adds lanes its cap had stopped.
func (m *lModel) free(lanes map[string]int) {
	for lane, n := range lanes {
		if m.active[lane] -= n; m.active[lane] <= 0 {
			delete(m.active, lane)
		}
		_, r := m.ready[lane]
		_, w := m.waits[lane]
		if !r && !w && len(m.waiting(lane)) > 0 {
			m.ready[lane] = m.vt
		}
	}
}

// checkLaneModel runs the lane model (TestProtocolModel/lanes).
func checkLaneModel(t *testing.T, c valkey.Client, b *bus.Bus) {
	base := strings.ReplaceAll(t.Name(), "/", ".")
	rapid.Check(t, func(t *rapid.T) {
		name := base + "." + strconv.FormatInt(modelSeq.Add(1), 10)
		m := &lModel{jobs: map[string]*lJob{}, caps: map[string]int{}, weights: map[string]float64{}, paused: map[string]bool{},
			ready: map[string]float64{}, waits: map[string]lHold{}, active: map[string]int{}}
		m.modelCore = newModelCore(t, c, b, name, func(id string) *mJob {
			if j := m.jobs[id]; j != nil {
				return &j.mJob
			}
			return nil
		})
		require.NoError(t, b.SetMaxAttempts(m.ctx, name, modelMax))
		if capA := rapid.IntRange(0, 2).Draw(t, "cap of a"); capA > 0 {
			require.NoError(t, b.SetLaneLimits(m.ctx, name, "a", bus.LaneLimits{Cap: capA}))
			m.caps["a"] = capA
		}
		if rapid.Bool().Draw(t, "b weighs 2") {
			require.NoError(t, b.SetLaneLimits(m.ctx, name, "b", bus.LaneLimits{Weight: 2}))
			m.weights["b"] = 2
		}
		if burst := rapid.IntRange(0, 2).Draw(t, "c's burst"); burst > 0 {
			require.NoError(t, b.SetLaneLimits(m.ctx, name, "c", bus.LaneLimits{Rate: bus.Rate{Limit: 1, Per: time.Hour, Burst: burst}}))
			m.burst = burst
		}
		t.Repeat(map[string]func(*rapid.T){
			"enqueue":      m.enqueue,
			"claim":        m.claim,
			"complete":     m.complete,
			"completeMany": m.completeMany,
			"fail":         m.fail,
			"snooze":       m.snooze,
			"rateLimited":  m.rateLimited,
			"extend":       m.extend,
			"reap":         m.reap,
			"promote":      m.promote,
			"pauseLane":    m.pauseLane,
			"resumeLane":   m.resumeLane,
			"setCap":       m.setCap,
			"advance":      m.advance,
			"":             m.check,
		})
	})
}
