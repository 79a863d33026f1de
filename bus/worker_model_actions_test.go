package bus_test

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/keys"
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
	h, ok := m.pickHandle(t)
	if !ok {
		t.Skip("no handle")
	}
	want := m.fence(h)
	err := m.b.Complete(m.ctx, bus.Job{Queue: m.name, ID: h.id, Token: h.token}, nil)
	require.Equal(t, want, staleCode(err))
	if want == "" {
		m.jobs[h.id.String()].state = mGone
	}
}

// completeMany retires several handles in one call; duplicates included: a job named twice
// is retired by its first passing entry, the later one answers no row.
func (m *model) completeMany(t *rapid.T) {
	if len(m.handles) == 0 {
		t.Skip("no handle")
	}
	var jobs []bus.Job
	var want []string
	for range rapid.IntRange(1, 4).Draw(t, "jobs") {
		h, _ := m.pickHandle(t)
		jobs = append(jobs, bus.Job{Queue: m.name, ID: h.id, Token: h.token})
		if reason := m.fence(h); reason != "" {
			want = append(want, fmt.Sprintf("%s %d %s", h.id, h.token, reason))
		} else {
			m.jobs[h.id.String()].state = mGone
		}
	}
	refused, err := m.b.CompleteMany(m.ctx, jobs, nil)
	require.NoError(t, err)
	var got []string
	for _, e := range refused {
		got = append(got, fmt.Sprintf("%s %d EMQSTALE %s", e.ID, e.Token, e.Reason))
	}
	require.Equal(t, want, got)
}

func (m *model) fail(t *rapid.T) {
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

func (m *model) extend(t *rapid.T) {
	if len(m.handles) == 0 {
		t.Skip("no handle")
	}
	// Distinct ids: the reply names lost jobs by id.
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
	for m.serverMillis() <= m.uncertainUntil {
		time.Sleep(time.Millisecond)
	}
	m.uncertainUntil = 0
	for _, j := range m.jobs {
		if j.short && (j.state == mActive || j.state == mScheduled) {
			j.past = true
		}
	}
}
