package bus_test

import (
	"fmt"
	"strconv"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/keys"
)

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
