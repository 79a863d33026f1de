package bus_test

import (
	"sort"
	"strconv"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/echocache/echocache/bus"
)

func (m *model) enqueue(t *rapid.T) {
	n := rapid.IntRange(1, 3).Draw(t, "n")
	if len(m.jobs)+n > modelMaxJobs {
		t.Skip("enough jobs")
	}
	when := rapid.SampledFrom([]string{"now", "short", "long"}).Draw(t, "when")
	var opts bus.EnqueueOpts
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
		j := &mJob{id: e.ID.String(), payload: string(jobs[i].Payload), state: mPending}
		if when != "now" {
			j.state, j.short = mScheduled, when == "short"
		}
		m.jobs[j.id] = j
		m.order = append(m.order, j.id)
	}
	if when == "short" {
		m.short()
	}
}

func (m *model) claim(t *rapid.T) {
	count := rapid.IntRange(1, 3).Draw(t, "count")
	short := rapid.Bool().Draw(t, "short lease")
	promote := rapid.Bool().Draw(t, "promote")
	if promote && m.uncertain() {
		t.Skip("promoting depends on uncertain run-ats")
	}
	opts := &bus.ClaimOpts{Count: count, Lease: duration(short), PromoteLimit: -1}
	if promote {
		opts.PromoteLimit = 100
		m.promoteDue()
	}
	got, err := m.b.Claim(m.ctx, m.name, opts)
	require.NoError(t, err)
	pending := m.in(mPending)
	sort.Slice(pending, func(i, k int) bool { return pending[i].id < pending[k].id }) // lex order is mint order
	want := pending[:min(count, len(pending))]
	require.Len(t, got, len(want))
	for i, j := range want {
		j.state, j.short, j.past = mActive, short, false
		j.attempts++
		require.Equal(t, j.id, got[i].ID.String(), "claim order")
		require.Equal(t, j.attempts, got[i].Token)
		require.Equal(t, j.payload, string(got[i].Payload))
		m.handles = append(m.handles, handle{got[i].ID, got[i].Token})
	}
	if short && len(want) > 0 {
		m.short()
	}
}

// promoteDue moves the model's due scheduled jobs to pending and returns their ids.
func (m *model) promoteDue() []string {
	var moved []string
	for _, j := range m.in(mScheduled) {
		if j.short && j.past {
			j.state, j.short, j.past = mPending, false, false
			moved = append(moved, j.id)
		}
	}
	return moved
}

func (m *model) complete(t *rapid.T) {
	id, ok := m.fenced(t, func(j bus.Job) error { return m.b.Complete(m.ctx, j, nil) })
	if ok {
		m.jobs[id].state = mGone
	}
}

func (m *model) completeMany(t *rapid.T) {
	m.modelCore.completeMany(t, func(id string) { m.jobs[id].state = mGone })
}

func (m *model) fail(t *rapid.T) {
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
	switch {
	case j.attempts >= limit:
		j.state = mDead
	case backoff == "none":
		j.state = mPending
	default:
		j.state, j.short, j.past = mScheduled, backoff == "short", false
	}
	require.Equal(t, string(j.state), string(out.State))
	if j.state == mScheduled && j.short {
		m.short()
	}
}

func (m *model) snooze(t *rapid.T) {
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
	if delay == "none" {
		j.state = mPending
	} else {
		j.state, j.short, j.past = mScheduled, delay == "short", false
		if j.short {
			m.short()
		}
	}
	require.Equal(t, string(j.state), string(out.State))
}

func (m *model) reap(t *rapid.T) {
	if m.uncertain() {
		t.Skip("reaping depends on uncertain leases")
	}
	r, err := m.b.Reap(m.ctx, m.name, nil)
	require.NoError(t, err)
	var wantReq, wantDead []string
	for _, j := range m.in(mActive) {
		if j.short && j.past {
			j.short, j.past = false, false
			if j.attempts >= modelMax {
				j.state = mDead
				wantDead = append(wantDead, j.id)
			} else {
				j.state = mPending
				wantReq = append(wantReq, j.id)
			}
		}
	}
	require.ElementsMatch(t, wantReq, idStrings(r.Requeued))
	require.ElementsMatch(t, wantDead, idStrings(r.Dead))
}

func (m *model) promote(t *rapid.T) {
	if m.uncertain() {
		t.Skip("promoting depends on uncertain run-ats")
	}
	moved, err := m.b.Promote(m.ctx, m.name, nil)
	require.NoError(t, err)
	require.ElementsMatch(t, m.promoteDue(), idStrings(moved))
}

// advance waits, on the server's clock, until every short deadline set so far has passed.
func (m *model) advance(t *rapid.T) {
	if !m.uncertain() {
		t.Skip("nothing to wait for")
	}
	m.waitPast()
}
