package bus_test

import (
	"bytes"
	"math"
	"slices"
	"sort"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/echocache/echocache/bus"
)

// lst is a lane as the model's laneclaim plans it.
type lst struct {
	active, taken, rr int
	paused, held      bool
	cap               int
	weight            float64
	rated             bool
	used              int
	n                 int // the set's size once counted; -1 before
}

type lEntry struct {
	lane  string
	score float64
}

// laneTurn is the most jobs a lane gives in one turn of the round robin (FORMAT lanes).
const laneTurn = 32

// lTurn is one turn of the plan: the lane, and how many of its jobs it gives.
type lTurn struct {
	lane string
	n    int
}

func before(s1 float64, a string, s2 float64, b string) bool {
	if s1 != s2 {
		return s1 < s2
	}
	return bytes.Compare([]byte(a), []byte(b)) < 0
}

// claim predicts laneclaim (or claim, for a queue without lane state) and compares.
func (m *lModel) claim(t *rapid.T) {
	count := rapid.IntRange(1, 8).Draw(t, "count")
	short := rapid.Bool().Draw(t, "short lease")
	promote := rapid.Bool().Draw(t, "promote")
	if m.uncertain() {
		t.Skip("claims depend on uncertain run-ats, leases or holds")
	}
	opts := &bus.ClaimOpts{Count: count, Lease: duration(short), PromoteLimit: -1}
	if promote {
		opts.PromoteLimit = 100
	}
	activeBefore := map[string]int{}
	for l, n := range m.active {
		activeBefore[l] = n
	}
	// Bus.Claim claims the rest at once while a laneclaim stops short at its bound (a lane
	// gave fewer jobs than its plan assumed), up to 16 calls.
	var want []*lJob
	for calls := 0; calls < 16 && len(want) < count; calls++ {
		more, short := m.predict(count-len(want), promote)
		for _, j := range more {
			j.state = mActive // claimed: the next call's plan does not see it waiting
		}
		want = append(want, more...)
		if !short {
			break
		}
	}
	got, err := m.b.Claim(m.ctx, m.name, opts)
	require.NoError(t, err)
	require.Len(t, got, len(want), "claimed %v, the model %v", lanesOf(got), jobIDsOf(want))
	perLane := map[string]int{}
	for i, j := range want {
		require.Equal(t, j.id, got[i].ID.String(), "claim order")
		j.state, j.short, j.past = mActive, short, false
		j.attempts++
		require.Equal(t, j.attempts, got[i].Token)
		require.Equal(t, j.payload, string(got[i].Payload))
		require.Equal(t, j.lane, got[i].Lane)
		m.handles = append(m.handles, handle{got[i].ID, got[i].Token})
		perLane[j.lane]++
	}
	// Invariants of the claim.
	for lane, n := range perLane {
		if c := m.caps[lane]; c > 0 && lane != "" {
			require.LessOrEqual(t, n, max(0, c-activeBefore[lane]), "lane %s at its cap %d had %d claimed; the claim took %d", lane, c, activeBefore[lane], n)
		}
	}
	if m.burst > 0 {
		require.LessOrEqual(t, m.grants, m.burst, "c's rate allows %d claims an hour", m.burst)
	}
	claimedZero := false
	for _, j := range want {
		if j.prio == 0 {
			claimedZero = true
		}
	}
	if claimedZero {
		for _, j := range m.urgent() {
			require.False(t, m.couldGive(j.lane), "urgent job %s of lane %q left while priority 0 was claimed", j.id, j.lane)
		}
	}
	if short && len(want) > 0 {
		m.short()
	}
}

// couldGive reports whether lane may give a job now (after a claim).
func (m *lModel) couldGive(lane string) bool {
	if lane == "" {
		return m.hold == nil || !m.hold.active()
	}
	if h, ok := m.waits[lane]; ok && h.active() {
		return false
	}
	if m.paused[lane] || (m.caps[lane] > 0 && m.active[lane] >= m.caps[lane]) {
		return false
	}
	return lane != "c" || m.burst == 0 || m.grants < m.burst
}

func jobIDsOf(js []*lJob) []string {
	var out []string
	for _, j := range js {
		out = append(out, j.id+"@"+j.lane)
	}
	return out
}

// predict is one laneclaim's plan and writes, on the model (see lua/laneclaim.lua); short is
// true when the call stops at its bound (its reply's wait is 0): a lane's set held fewer jobs
// than the plan assumed. (The model's few lanes never use up the call's visits.)
func (m *lModel) predict(count int, promote bool) (out []*lJob, short bool) {
	var promoted []*lJob
	if promote {
		for _, j := range m.in(mScheduled) {
			if j.short && j.past {
				j.short, j.past = false, false
				j.state = mPending
				promoted = append(promoted, j)
			}
		}
	}
	if !m.joblane() && !m.flow() && len(m.ready) == 0 {
		pending := append([]*lJob(nil), m.in(mPending)...)
		sort.Slice(pending, func(i, k int) bool { return pending[i].id < pending[k].id })
		return pending[:min(count, len(pending))], false
	}
	readyAdd := map[string]bool{}
	// The promoted jobs of a lane make it join laneready (laneclaim's own promote).
	for _, j := range promoted {
		if j.stamped && j.prio == 0 && j.lane != "" {
			readyAdd[j.lane] = true
		}
	}
	if m.hold != nil && !m.hold.active() {
		m.hold = nil
	}
	for lane, h := range m.waits {
		if !h.active() {
			delete(m.waits, lane)
			readyAdd[lane] = true
		}
	}
	plain := func() []*lJob {
		var out []*lJob
		for _, j := range m.in(mPending) {
			if j.lane == "" && j.prio == 0 {
				out = append(out, j)
			}
		}
		sort.Slice(out, func(i, k int) bool { return out[i].id < out[k].id })
		return out
	}
	if m.hold == nil && len(plain()) > 0 {
		readyAdd[""] = true
	}
	for lane := range readyAdd {
		m.join(lane, true)
	}
	vt0 := m.vt
	vt := m.vt
	// The plan.
	var entries []lEntry
	for lane, s := range m.ready {
		entries = append(entries, lEntry{lane, s})
	}
	sort.Slice(entries, func(i, k int) bool {
		return before(entries[i].score, entries[i].lane, entries[k].score, entries[k].lane)
	})
	st := map[string]*lst{}
	mk := func(lane string) *lst {
		if s := st[lane]; s != nil {
			return s
		}
		s := &lst{active: m.active[lane], paused: m.paused[lane], cap: m.caps[lane], weight: m.weight(lane), n: -1}
		if h, ok := m.waits[lane]; ok && h.active() {
			s.held = true
		}
		if lane == "c" && m.burst > 0 {
			s.rated = true
		}
		if lane == "" {
			s.held, s.cap, s.paused, s.rated = m.hold != nil, 0, false, false
		}
		st[lane] = s
		return s
	}
	can := func(s *lst) bool { return !s.rated || m.grants+s.used < m.burst }
	eligible := func(s *lst) bool {
		return !s.paused && !s.held && !(s.cap > 0 && s.active+s.taken >= s.cap) && can(s)
	}
	got := 0
	var urgentTake []*lJob
	urgent := m.urgent()
	for _, j := range urgent {
		mk(j.lane)
	}
	for _, e := range entries {
		mk(e.lane)
	}
	for _, j := range urgent {
		if got >= count {
			break
		}
		if s := st[j.lane]; eligible(s) {
			s.taken++
			if s.rated {
				s.used++
			}
			urgentTake = append(urgentTake, j)
			got++
		}
	}
	unready, score, waitAt := map[string]bool{}, map[string]float64{}, map[string]bool{}
	var plan []lTurn
	pendingLeft := -1
	countOf := func(lane string) int {
		if lane == "" {
			if pendingLeft < 0 {
				pendingLeft = len(plain())
			}
			return pendingLeft
		}
		s := st[lane]
		if s.n < 0 {
			s.n = len(m.waiting(lane))
		}
		return s.n
	}
	for got < count && len(entries) > 0 {
		e := entries[0]
		entries = entries[1:]
		s := st[e.lane]
		room := min(laneTurn, count-got)
		if s.cap > 0 {
			room = min(room, s.cap-s.active-s.taken)
		}
		left := 1
		if s.rr > 0 || e.lane == "" || room > 1 {
			left = countOf(e.lane) - s.rr
		}
		switch {
		case s.paused || s.held || left <= 0 || room <= 0:
			unready[e.lane] = true
		case !can(s):
			unready[e.lane] = true
			waitAt[e.lane] = true
		default:
			room = min(room, left)
			k := 0
			for {
				s.taken++
				if s.rated {
					s.used++
				}
				k++
				if k >= room || !can(s) {
					break
				}
			}
			s.rr += k
			got += k
			plan = append(plan, lTurn{e.lane, k})
			ns := math.Max(e.score, vt) + float64(k)/s.weight
			vt = math.Max(vt, e.score)
			e.score = ns
			score[e.lane] = ns
			at := len(entries)
			for i, x := range entries {
				if before(ns, e.lane, x.score, x.lane) {
					at = i
					break
				}
			}
			entries = slices.Insert(entries, at, e)
		}
	}
	// The writes.
	claimedIn := map[string]int{}
	out = append(out, urgentTake...)
	for _, j := range urgentTake {
		claimedIn[j.lane]++
	}
	popped := map[string][]*lJob{}
	for lane, s := range st {
		if s.rr == 0 {
			continue
		}
		var set []*lJob
		if lane == "" {
			set = plain()
		} else {
			set = m.waiting(lane)
		}
		take := set[:min(s.rr, len(set))]
		if len(take) < s.rr {
			unready[lane] = true
			delete(score, lane)
			short = true
		}
		popped[lane] = take
	}
	next := map[string]int{}
	for _, turn := range plan {
		for range turn.n {
			if p := popped[turn.lane]; next[turn.lane] < len(p) {
				out = append(out, p[next[turn.lane]])
				next[turn.lane]++
				claimedIn[turn.lane]++
			}
		}
	}
	for lane, s := range st {
		n := claimedIn[lane]
		if lane == "" {
			if _, ok := score[lane]; ok && pendingLeft >= 0 && pendingLeft-s.rr <= 0 {
				unready[lane] = true
			}
			continue
		}
		if n > 0 {
			m.active[lane] += n
			if s.rated {
				m.grants += n
			}
		}
		s.active += n
		s.used = 0
		if _, ok := score[lane]; ok {
			switch {
			case s.n >= 0 && s.n-s.rr <= 0:
				unready[lane] = true
			case s.cap > 0 && s.active >= s.cap:
				unready[lane] = true
			case !can(s):
				unready[lane] = true
				waitAt[lane] = true
			}
		}
	}
	for lane := range unready {
		delete(m.ready, lane)
	}
	for lane, sc := range score {
		if !unready[lane] {
			m.ready[lane] = sc
		}
	}
	for lane := range waitAt {
		m.waits[lane] = lHold{} // an hour: c's rate
	}
	if len(m.ready) == 0 {
		if vt0 != 0 {
			m.vt = 0
		}
	} else if vt != vt0 {
		m.vt = vt
	}
	poppedLaned := 0
	for _, j := range out {
		if j.lane != "" && j.prio == 0 {
			poppedLaned++
		}
	}
	if !m.joblane() && m.laneWaiting()-poppedLaned <= 0 && m.vt == 0 && m.hold == nil {
		clear(m.ready)
	}
	return out, short
}
