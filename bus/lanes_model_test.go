package bus_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"
	"pgregory.net/rapid"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/keys"
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
	t       *rapid.T
	ctx     context.Context
	c       valkey.Client
	b       *bus.Bus
	name    string
	q       keys.Queue
	jobs    map[string]*lJob
	order   []string
	handles []handle

	uncertainUntil int64

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

func (m *lModel) serverMillis() int64 {
	tm, err := m.c.Do(m.ctx, m.c.B().Time().Build()).AsStrSlice()
	require.NoError(m.t, err)
	sec, _ := strconv.ParseInt(tm[0], 10, 64)
	usec, _ := strconv.ParseInt(tm[1], 10, 64)
	return sec*1000 + usec/1000
}

func (m *lModel) short()          { m.uncertainUntil = m.serverMillis() + modelShort.Milliseconds() + 1 }
func (m *lModel) uncertain() bool { return m.uncertainUntil != 0 }
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

func (m *lModel) fence(h handle) string {
	j := m.jobs[h.id.String()]
	switch {
	case j == nil || j.state == mGone:
		return "EMQSTALE no row"
	case j.state != mActive:
		return "EMQSTALE not active"
	case j.attempts != h.token:
		return "EMQSTALE token mismatch"
	}
	return ""
}

func (m *lModel) pickHandle(t *rapid.T) (handle, bool) {
	if len(m.handles) == 0 {
		return handle{}, false
	}
	h := m.handles[rapid.IntRange(0, len(m.handles)-1).Draw(t, "handle")]
	if rapid.IntRange(0, 9).Draw(t, "forge") == 0 {
		h.token += int64(rapid.IntRange(1, 3).Draw(t, "forged token delta"))
	}
	return h, true
}

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

func (m *lModel) enqueue(t *rapid.T) {
	n := rapid.IntRange(1, 3).Draw(t, "n")
	if len(m.jobs)+n > modelMaxJobs {
		t.Skip("enough jobs")
	}
	lane := rapid.SampledFrom(laneModelLanes).Draw(t, "lane")
	prio := rapid.SampledFrom([]int{0, 0, 0, 2, 3}).Draw(t, "priority")
	when := rapid.SampledFrom([]string{"now", "now", "short", "long"}).Draw(t, "when")
	opts := bus.EnqueueOpts{Lane: lane, Priority: prio}
	switch when {
	case "short":
		opts.Delay = modelShort
	case "long":
		opts.Delay = modelLong
	}
	jobs := make([]bus.NewJob, n)
	for i := range jobs {
		jobs[i].Payload = []byte("p" + strconv.Itoa(len(m.order)+i))
	}
	out, err := m.b.EnqueueBatch(m.ctx, m.name, jobs, &opts)
	require.NoError(t, err)
	for i, e := range out {
		j := &lJob{mJob: mJob{id: e.ID.String(), payload: string(jobs[i].Payload), state: mPending}, lane: lane, prio: prio, stamped: lane != "" || prio > 0}
		if when != "now" {
			j.state, j.short = mScheduled, when == "short"
		}
		m.jobs[j.id] = j
		m.order = append(m.order, j.id)
	}
	if when == "now" && prio == 0 && lane != "" {
		m.join(lane, true) // laneenqueue joins the lane whatever lanewait holds
	}
	if when == "short" {
		m.short()
	}
}

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
	want := m.predict(count, promote)
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

// predict is laneclaim's plan and writes, on the model (see lua/laneclaim.lua).
func (m *lModel) predict(count int, promote bool) []*lJob {
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
		var pending []*lJob
		for _, j := range m.in(mPending) {
			pending = append(pending, j)
		}
		sort.Slice(pending, func(i, k int) bool { return pending[i].id < pending[k].id })
		return pending[:min(count, len(pending))]
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
	var out []*lJob
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
	return out
}

func (m *lModel) complete(t *rapid.T) {
	h, ok := m.pickHandle(t)
	if !ok {
		t.Skip("no handle")
	}
	want := m.fence(h)
	err := m.b.Complete(m.ctx, bus.Job{Queue: m.name, ID: h.id, Token: h.token}, nil)
	require.Equal(t, want, staleCode(err))
	if want == "" {
		m.retire(m.jobs[h.id.String()])
	}
}

func (m *lModel) retire(j *lJob) {
	j.state = mGone
	if j.stamped {
		j.stamped = false
		if j.lane != "" {
			m.free(map[string]int{j.lane: 1})
		}
	}
}

func (m *lModel) completeMany(t *rapid.T) {
	if len(m.handles) == 0 {
		t.Skip("no handle")
	}
	var jobs []bus.Job
	var want []string
	freed := map[string]int{}
	for range rapid.IntRange(1, 4).Draw(t, "jobs") {
		h, _ := m.pickHandle(t)
		jobs = append(jobs, bus.Job{Queue: m.name, ID: h.id, Token: h.token})
		if reason := m.fence(h); reason != "" {
			want = append(want, fmt.Sprintf("%s %d %s", h.id, h.token, reason))
		} else {
			j := m.jobs[h.id.String()]
			j.state = mGone
			if j.stamped {
				j.stamped = false
				if j.lane != "" {
					freed[j.lane]++
				}
			}
		}
	}
	refused, err := m.b.CompleteMany(m.ctx, jobs, nil)
	require.NoError(t, err)
	var got []string
	for _, e := range refused {
		got = append(got, fmt.Sprintf("%s %d EMQSTALE %s", e.ID, e.Token, e.Reason))
	}
	require.Equal(t, want, got)
	m.free(freed)
}

// back takes j out of active: its lane's slot.
func (m *lModel) back(j *lJob) {
	if j.stamped && j.lane != "" {
		m.free(map[string]int{j.lane: 1})
	}
}

func (m *lModel) fail(t *rapid.T) {
	h, ok := m.pickHandle(t)
	if !ok {
		t.Skip("no handle")
	}
	backoff := rapid.SampledFrom([]string{"none", "short", "long"}).Draw(t, "backoff")
	override := rapid.SampledFrom([]int{0, 0, 1, 5}).Draw(t, "max attempts")
	opts := &bus.FailOpts{MaxAttempts: override}
	if backoff != "none" {
		opts.Backoff = duration(backoff == "short")
	}
	want := m.fence(h)
	out, err := m.b.Fail(m.ctx, bus.Job{Queue: m.name, ID: h.id, Token: h.token}, opts)
	require.Equal(t, want, staleCode(err))
	if want != "" {
		return
	}
	j := m.jobs[h.id.String()]
	limit := int64(modelMax)
	if override > 0 {
		limit = int64(override)
	}
	m.back(j)
	switch {
	case j.attempts-j.refunds >= limit:
		j.state = mDead
	case backoff == "none":
		m.toWaiting(j)
	default:
		j.state, j.short, j.past = mScheduled, backoff == "short", false
	}
	require.Equal(t, string(j.state), string(out.State))
	if j.state == mScheduled && j.short {
		m.short()
	}
}

func (m *lModel) snooze(t *rapid.T) {
	h, ok := m.pickHandle(t)
	if !ok {
		t.Skip("no handle")
	}
	delay := rapid.SampledFrom([]string{"none", "short", "long"}).Draw(t, "delay")
	d := time.Duration(0)
	if delay != "none" {
		d = duration(delay == "short")
	}
	want := m.fence(h)
	out, err := m.b.Snooze(m.ctx, bus.Job{Queue: m.name, ID: h.id, Token: h.token}, d, nil)
	require.Equal(t, want, staleCode(err))
	if want != "" {
		return
	}
	j := m.jobs[h.id.String()]
	m.back(j)
	if delay == "none" {
		m.toWaiting(j)
	} else {
		j.state, j.short, j.past = mScheduled, delay == "short", false
		if j.short {
			m.short()
		}
	}
	require.Equal(t, string(j.state), string(out.State))
}

// rateLimited hands a job back with RateLimited: refunded, its lane held 5 ms or an hour.
func (m *lModel) rateLimited(t *rapid.T) {
	h, ok := m.pickHandle(t)
	if !ok {
		t.Skip("no handle")
	}
	short := rapid.Bool().Draw(t, "short hold")
	want := m.fence(h)
	_, err := m.b.RateLimited(m.ctx, bus.Job{Queue: m.name, ID: h.id, Token: h.token}, duration(short), nil)
	require.Equal(t, want, staleCode(err))
	if want != "" {
		return
	}
	j := m.jobs[h.id.String()]
	if j.stamped && j.lane != "" {
		if m.active[j.lane]--; m.active[j.lane] <= 0 {
			delete(m.active, j.lane)
		}
	}
	j.state = mPending
	j.refunds++
	j.stamped = true
	hold := lHold{short: short}
	if j.lane == "" {
		if m.hold == nil || m.hold.short { // an hour outlasts 5 ms; two short holds: the later
			m.hold = &hold
		}
		delete(m.ready, "")
	} else {
		if old, ok := m.waits[j.lane]; !ok || old.short {
			m.waits[j.lane] = hold
		}
		delete(m.ready, j.lane)
	}
	if short {
		m.short()
	}
}

func (m *lModel) extend(t *rapid.T) {
	if len(m.handles) == 0 {
		t.Skip("no handle")
	}
	seen := map[keys.JobID]bool{}
	var hs []handle
	for range rapid.IntRange(1, 3).Draw(t, "jobs") {
		if h, _ := m.pickHandle(t); !seen[h.id] {
			seen[h.id] = true
			hs = append(hs, h)
		}
	}
	short := rapid.Bool().Draw(t, "short lease")
	jobs := make([]bus.Job, len(hs))
	var wantLost []string
	for i, h := range hs {
		jobs[i] = bus.Job{Queue: m.name, ID: h.id, Token: h.token}
		if reason := m.fence(h); reason != "" {
			wantLost = append(wantLost, h.id.String()+" "+reason)
		}
	}
	_, lost, err := m.b.ExtendMany(m.ctx, jobs, &bus.ExtendOpts{Lease: duration(short)})
	require.NoError(t, err)
	var gotLost []string
	for _, l := range lost {
		gotLost = append(gotLost, l.ID.String()+" EMQSTALE "+string(l.Reason))
	}
	require.Equal(t, wantLost, gotLost)
	renewed := false
	for _, h := range hs {
		if m.fence(h) == "" {
			j := m.jobs[h.id.String()]
			j.short, j.past = short, false
			renewed = true
		}
	}
	if short && renewed {
		m.short()
	}
}

func (m *lModel) reap(t *rapid.T) {
	if m.uncertain() {
		t.Skip("reaping depends on uncertain leases")
	}
	r, err := m.b.Reap(m.ctx, m.name, nil)
	require.NoError(t, err)
	var wantReq, wantDead []string
	freed := map[string]int{}
	for _, j := range m.in(mActive) {
		if j.short && j.past {
			j.short, j.past = false, false
			if j.stamped && j.lane != "" {
				freed[j.lane]++
			}
			if j.attempts-j.refunds >= modelMax {
				j.state = mDead
				wantDead = append(wantDead, j.id)
			} else {
				m.toWaiting(j)
				wantReq = append(wantReq, j.id)
			}
		}
	}
	m.free(freed)
	require.ElementsMatch(t, wantReq, idStrings(r.Requeued))
	require.ElementsMatch(t, wantDead, idStrings(r.Dead))
}

func (m *lModel) promote(t *rapid.T) {
	if m.uncertain() {
		t.Skip("promoting depends on uncertain run-ats")
	}
	moved, err := m.b.Promote(m.ctx, m.name, nil)
	require.NoError(t, err)
	var want []string
	for _, j := range m.in(mScheduled) {
		if j.short && j.past {
			j.short, j.past = false, false
			m.toWaiting(j)
			want = append(want, j.id)
		}
	}
	require.ElementsMatch(t, want, idStrings(moved))
}

func (m *lModel) pauseLane(t *rapid.T) {
	lane := rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "lane")
	require.NoError(t, m.b.PauseLane(m.ctx, m.name, lane))
	if !m.paused[lane] {
		m.paused[lane] = true
		delete(m.ready, lane)
	}
}

func (m *lModel) resumeLane(t *rapid.T) {
	lane := rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "lane")
	require.NoError(t, m.b.ResumeLane(m.ctx, m.name, lane))
	if !m.paused[lane] {
		return
	}
	delete(m.paused, lane)
	if _, held := m.waits[lane]; !held && len(m.waiting(lane)) > 0 {
		m.join(lane, true)
	}
}

func (m *lModel) setCap(t *rapid.T) {
	c := rapid.IntRange(0, 2).Draw(t, "cap of a")
	require.NoError(t, m.b.SetLaneLimits(m.ctx, m.name, "a", bus.LaneLimits{Cap: c})) // keeps a's pause
	m.caps["a"] = c
}

// advance waits, on the server's clock, until every short deadline and hold has passed.
func (m *lModel) advance(t *rapid.T) {
	if !m.uncertain() {
		t.Skip("nothing to wait for")
	}
	for m.serverMillis() <= m.uncertainUntil {
		time.Sleep(time.Millisecond)
	}
	m.uncertainUntil = 0
	for _, j := range m.jobs {
		if j.short && (j.state == mActive || j.state == mScheduled) {
			j.past = true
		}
	}
	for lane, h := range m.waits {
		if h.short {
			h.past = true
			m.waits[lane] = h
		}
	}
	if m.hold != nil && m.hold.short {
		m.hold.past = true
	}
}

// check compares the server's queue and its lane state with the model, and the invariants.
func (m *lModel) check(t *rapid.T) {
	c := m.c
	cmds := valkey.Commands{
		c.B().Zrange().Key(m.q.Pending()).Min("0").Max("-1").Build(),
		c.B().Zrange().Key(m.q.Active()).Min("0").Max("-1").Build(),
		c.B().Zrange().Key(m.q.Schedule()).Min("0").Max("-1").Build(),
		c.B().Zrange().Key(m.q.Dead()).Min("0").Max("-1").Build(),
		c.B().Zrange().Key(m.q.Urgent()).Min("0").Max("-1").Withscores().Build(),
		c.B().Hgetall().Key(m.q.JobLane()).Build(),
		c.B().Zrange().Key(m.q.LaneReady()).Min("0").Max("-1").Withscores().Build(),
		c.B().Zrange().Key(m.q.LaneWait()).Min("0").Max("-1").Build(),
		c.B().Hgetall().Key(m.q.LaneActive()).Build(),
		c.B().Hgetall().Key(m.q.Flow()).Build(),
	}
	for _, lane := range []string{"a", "b", "c"} {
		k, _ := m.q.LanePending(lane)
		cmds = append(cmds, c.B().Zrange().Key(k).Min("0").Max("-1").Build())
	}
	const fixed = 13
	for _, id := range m.order {
		parsed, _ := keys.ParseJobID(id)
		rk, _ := m.q.Job(parsed)
		cmds = append(cmds, c.B().Hgetall().Key(rk).Build())
	}
	res := c.DoMulti(m.ctx, cmds...)
	strs := func(i int) []string {
		s, err := res[i].AsStrSlice()
		require.NoError(t, err)
		return s
	}
	ids := func(js []*lJob) []string {
		var out []string
		for _, j := range js {
			out = append(out, j.id)
		}
		slices.Sort(out)
		return out
	}
	var plainPending []*lJob
	for _, j := range m.in(mPending) {
		if j.lane == "" && j.prio == 0 {
			plainPending = append(plainPending, j)
		}
	}
	for i, want := range [][]*lJob{plainPending, m.in(mActive), m.in(mScheduled), m.in(mDead)} {
		got := strs(i)
		slices.Sort(got)
		require.Equal(t, fmt.Sprint(ids(want)), fmt.Sprint(got), "set %d", i)
	}
	// urgent, with scores.
	uz, err := res[4].AsZScores()
	require.NoError(t, err)
	var gotU, wantU []string
	for _, z := range uz {
		gotU = append(gotU, fmt.Sprintf("%s %v", z.Member, z.Score))
	}
	for _, j := range m.urgent() {
		wantU = append(wantU, fmt.Sprintf("%s %v", j.id, float64(-j.prio)))
	}
	require.Equal(t, wantU, gotU, "urgent")
	jl, err := res[5].AsStrMap()
	require.NoError(t, err)
	wantJL := map[string]string{}
	for _, j := range m.jobs {
		if j.stamped && j.state != mGone {
			wantJL[j.id] = fmt.Sprintf("%d:%d:%s", j.prio, j.refunds, j.lane)
		}
	}
	require.Equal(t, wantJL, jl, "joblane")
	rz, err := res[6].AsZScores()
	require.NoError(t, err)
	gotR := map[string]float64{}
	for _, z := range rz {
		gotR[z.Member] = z.Score
	}
	require.Equal(t, m.ready, gotR, "laneready and its scores")
	gotW := strs(7)
	var wantW []string
	for lane := range m.waits {
		wantW = append(wantW, lane)
	}
	slices.Sort(gotW)
	slices.Sort(wantW)
	require.Equal(t, fmt.Sprint(wantW), fmt.Sprint(gotW), "lanewait")
	la, err := res[8].AsStrMap()
	require.NoError(t, err)
	wantA := map[string]string{}
	for lane, n := range m.active {
		wantA[lane] = strconv.Itoa(n)
	}
	require.Equal(t, wantA, la, "laneactive")
	fl, err := res[9].AsStrMap()
	require.NoError(t, err)
	wantF := map[string]string{}
	if n := m.laneWaiting(); n > 0 {
		wantF["waiting"] = strconv.Itoa(n)
	}
	if m.vt != 0 {
		wantF["vt"] = strconv.FormatFloat(m.vt, 'g', -1, 64)
	}
	if m.hold != nil {
		require.NotEmpty(t, fl["hold"], "flow's hold")
		wantF["hold"] = fl["hold"]
	}
	if v, ok := fl["vt"]; ok {
		f, err := strconv.ParseFloat(v, 64)
		require.NoError(t, err)
		fl["vt"] = strconv.FormatFloat(f, 'g', -1, 64)
	}
	require.Equal(t, wantF, fl, "flow")
	for i, lane := range []string{"a", "b", "c"} {
		got := strs(10 + i)
		require.Equal(t, fmt.Sprint(ids(m.waiting(lane))), fmt.Sprint(got), "lane %s's set", lane)
	}
	for i, id := range m.order {
		row, err := res[fixed+i].AsStrMap()
		require.NoError(t, err)
		j := m.jobs[id]
		if j.state == mGone {
			require.Empty(t, row, "job %s was retired", id)
			continue
		}
		require.Equal(t, map[string]string{"state": string(j.state), "attempts": strconv.FormatInt(j.attempts, 10), "payload": j.payload}, row, "job %s", id)
	}
	// Invariants, independent of the model's bookkeeping: laneactive counts the active jobs of
	// each lane; no lane runs more than one turn ahead of the virtual clock.
	counted := map[string]string{}
	for _, j := range m.in(mActive) {
		if j.stamped && j.lane != "" {
			n, _ := strconv.Atoi(counted[j.lane])
			counted[j.lane] = strconv.Itoa(n + 1)
		}
	}
	require.Equal(t, counted, la, "laneactive counts the lanes' jobs in active")
	vt := m.vt
	for lane, s := range gotR {
		require.LessOrEqual(t, s, vt+laneTurn/m.weight(lane), "lane %q at %v, more than a turn ahead of the virtual clock %v", lane, s, vt)
	}
}

// checkLaneModel runs the lane model (TestProtocolModel/lanes).
func checkLaneModel(t *testing.T, c valkey.Client, b *bus.Bus) {
	base := strings.ReplaceAll(t.Name(), "/", ".")
	rapid.Check(t, func(t *rapid.T) {
		name := base + "." + strconv.FormatInt(modelSeq.Add(1), 10)
		m := &lModel{t: t, ctx: context.Background(), c: c, b: b, name: name, q: keys.MustQueue(name), jobs: map[string]*lJob{},
			caps: map[string]int{}, weights: map[string]float64{}, paused: map[string]bool{}, ready: map[string]float64{},
			waits: map[string]lHold{}, active: map[string]int{}}
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
