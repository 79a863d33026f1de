package bus_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"
	"pgregory.net/rapid"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/keys"
)

// modelCore is what the protocol model (worker_model_test.go) and the lane model
// (lanes_model_test.go) share: the queue they drive, the handles claims returned, the clock of
// short deadlines, and the steps both model alike (the fence, extend, a claimed job's call
// and its refusal, the options a fail or a snooze draws).
type modelCore struct {
	t       *rapid.T
	ctx     context.Context
	c       valkey.Client
	b       *bus.Bus
	name    string
	q       keys.Queue
	order   []string // ids in enqueue order
	handles []handle
	// uncertainUntil is the server time (ms) after which every short deadline set so far has
	// passed; 0 when no short deadline is uncertain.
	uncertainUntil int64
	// job is the model's job of id; nil when there is none.
	job func(id string) *mJob
}

type handle struct {
	id    keys.JobID
	token int64
}

func newModelCore(t *rapid.T, c valkey.Client, b *bus.Bus, name string, job func(string) *mJob) modelCore {
	return modelCore{t: t, ctx: context.Background(), c: c, b: b, name: name, q: keys.MustQueue(name), job: job}
}

func (m *modelCore) serverMillis() int64 {
	tm, err := m.c.Do(m.ctx, m.c.B().Time().Build()).AsStrSlice()
	require.NoError(m.t, err)
	sec, _ := strconv.ParseInt(tm[0], 10, 64)
	usec, _ := strconv.ParseInt(tm[1], 10, 64)
	return sec*1000 + usec/1000
}

// short records that a short deadline was just set (by a script that read TIME before now).
func (m *modelCore) short() {
	m.uncertainUntil = m.serverMillis() + modelShort.Milliseconds() + 1
}

func (m *modelCore) uncertain() bool { return m.uncertainUntil != 0 }

// waitPast waits, on the server's clock, until every short deadline set so far has passed,
// and marks the short leases and run-ats past.
func (m *modelCore) waitPast() {
	for m.serverMillis() <= m.uncertainUntil {
		time.Sleep(time.Millisecond)
	}
	m.uncertainUntil = 0
	for _, id := range m.order {
		if j := m.job(id); j.short && (j.state == mActive || j.state == mScheduled) {
			j.past = true
		}
	}
}

func duration(short bool) time.Duration {
	if short {
		return modelShort
	}
	return modelLong
}

// fence is the protocol's check on a claimed job: "" when token holds it.
func (m *modelCore) fence(h handle) string {
	j := m.job(h.id.String())
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

func staleCode(err error) string {
	var se *bus.StaleError
	if errors.As(err, &se) {
		return "EMQSTALE " + string(se.Reason)
	}
	if err == nil {
		return ""
	}
	return "unexpected: " + err.Error()
}

func (m *modelCore) pickHandle(t *rapid.T) (handle, bool) {
	if len(m.handles) == 0 {
		return handle{}, false
	}
	h := m.handles[rapid.IntRange(0, len(m.handles)-1).Draw(t, "handle")]
	if rapid.IntRange(0, 9).Draw(t, "forge") == 0 {
		h.token += int64(rapid.IntRange(1, 3).Draw(t, "forged token delta")) // a token never minted
	}
	return h, true
}

// fenced takes a step on one claimed job: it picks a handle (none: the step is skipped), calls
// do with its job, and requires the refusal the fence predicts, or none. It returns the job's
// id, and whether the call was accepted.
func (m *modelCore) fenced(t *rapid.T, do func(bus.Job) error) (string, bool) {
	h, ok := m.pickHandle(t)
	if !ok {
		t.Skip("no handle")
	}
	want := m.fence(h)
	require.Equal(t, want, staleCode(do(bus.Job{Queue: m.name, ID: h.id, Token: h.token})))
	return h.id.String(), want == ""
}

// completeMany retires several handles in one call, duplicates included: a job named twice is
// retired by its first passing entry, the later one answers no row. retire takes each job the
// call retires, before the call; the model marks it gone.
func (m *modelCore) completeMany(t *rapid.T, retire func(id string)) {
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
			retire(h.id.String())
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

// failOpts draws a fail's options: a backoff ("none", "short" or "long") and a max attempts
// override; limit is the max attempts the fail applies.
func failOpts(t *rapid.T) (opts *bus.FailOpts, backoff string, limit int64) {
	backoff = rapid.SampledFrom([]string{"none", "short", "long"}).Draw(t, "backoff")
	override := rapid.SampledFrom([]int{0, 0, 1, 5}).Draw(t, "max attempts")
	opts = &bus.FailOpts{MaxAttempts: override}
	if backoff != "none" {
		opts.Backoff = duration(backoff == "short")
	}
	limit = int64(modelMax)
	if override > 0 {
		limit = int64(override)
	}
	return opts, backoff, limit
}

// snoozeDelay draws a snooze's delay: "none", "short" or "long", and its duration.
func snoozeDelay(t *rapid.T) (string, time.Duration) {
	delay := rapid.SampledFrom([]string{"none", "short", "long"}).Draw(t, "delay")
	if delay == "none" {
		return delay, 0
	}
	return delay, duration(delay == "short")
}

// extend renews one to three distinct handles in one call (the reply names lost jobs by id)
// with a short or a long lease.
func (m *modelCore) extend(t *rapid.T) {
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
			j := m.job(h.id.String())
			j.short, j.past = short, false
			renewed = true
		}
	}
	if short && renewed {
		m.short()
	}
}

func idStrings(ids []keys.JobID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.String()
	}
	return out
}
