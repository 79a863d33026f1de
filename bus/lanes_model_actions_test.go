package bus_test

import (
	"strconv"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/echocache/echocache/bus"
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
	id, ok := m.fenced(t, func(j bus.Job) error { return m.b.Complete(m.ctx, j, nil) })
	if ok {
		m.retire(m.jobs[id])
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
	freed := map[string]int{}
	m.modelCore.completeMany(t, func(id string) {
		j := m.jobs[id]
		j.state = mGone
		if j.stamped {
			j.stamped = false
			if j.lane != "" {
				freed[j.lane]++
			}
		}
	})
	m.free(freed)
}

// back takes j out of active: its lane's slot.
func (m *lModel) back(j *lJob) {
	if j.stamped && j.lane != "" {
		m.free(map[string]int{j.lane: 1})
	}
}

func (m *lModel) fail(t *rapid.T) {
	opts, backoff, limit := failOpts(t)
	var out bus.Outcome
	id, ok := m.fenced(t, func(j bus.Job) (err error) {
		out, err = m.b.Fail(m.ctx, j, opts)
		return err
	})
	if !ok {
		return
	}
	j := m.jobs[id]
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
	delay, d := snoozeDelay(t)
	var out bus.Outcome
	id, ok := m.fenced(t, func(j bus.Job) (err error) {
		out, err = m.b.Snooze(m.ctx, j, d, nil)
		return err
	})
	if !ok {
		return
	}
	j := m.jobs[id]
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
	short := rapid.Bool().Draw(t, "short hold")
	id, ok := m.fenced(t, func(j bus.Job) error {
		_, err := m.b.RateLimited(m.ctx, j, duration(short), nil)
		return err
	})
	if !ok {
		return
	}
	j := m.jobs[id]
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
	m.waitPast()
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
