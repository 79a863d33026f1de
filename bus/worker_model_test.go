package bus_test

import (
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"
	"pgregory.net/rapid"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// The protocol model: a rapid state machine drives enqueue, claim, extend, complete (one and
// many), fail,
// snooze, reap, promote and time advances against a real server and against a Go model of
// the protocol, and compares every reply and, after every step, the whole state of the
// queue (every row, every set). `make test` runs rapid's default check count; `make soak`
// runs 2,000 (-rapid.checks=2000).
//
// Time: the scripts read the server's TIME, and the protocol takes no clock from the
// client, so time advances for real. Every duration is either long (an hour: it never
// elapses within a check) or short (5 ms). A short lease or run-at is uncertain until an
// "advance" step waits, on the server's clock, past every short deadline set so far; until
// then the steps whose outcome depends on it (reap; promote, and claim when it promotes) are
// not taken, so the model stays exact.

const (
	modelShort   = 5 * time.Millisecond
	modelLong    = time.Hour
	modelMax     = 3 // the queue's max_attempts
	modelMaxJobs = 12
)

type mState string

const (
	mPending   mState = "pending"
	mActive    mState = "active"
	mScheduled mState = "scheduled"
	mDead      mState = "dead"
	mGone      mState = "gone"
)

type mJob struct {
	id       string
	payload  string
	state    mState
	attempts int64
	short    bool // the lease or run-at is short
	past     bool // a short lease or run-at has certainly passed
}

type model struct {
	modelCore
	jobs map[string]*mJob
}

func (m *model) in(s mState) []*mJob {
	var out []*mJob
	for _, id := range m.order {
		if j := m.jobs[id]; j.state == s {
			out = append(out, j)
		}
	}
	return out
}

// check compares the server's whole queue with the model: every row and every set.
func (m *model) check(t *rapid.T) {
	cmds := valkey.Commands{
		m.c.B().Zrange().Key(m.q.Pending()).Min("0").Max("-1").Build(),
		m.c.B().Zrange().Key(m.q.Active()).Min("0").Max("-1").Build(),
		m.c.B().Zrange().Key(m.q.Schedule()).Min("0").Max("-1").Build(),
		m.c.B().Zrange().Key(m.q.Dead()).Min("0").Max("-1").Build(),
	}
	for _, id := range m.order {
		parsed, err := keys.ParseJobID(id)
		require.NoError(t, err)
		rk, err := m.q.Job(parsed)
		require.NoError(t, err)
		cmds = append(cmds, m.c.B().Hgetall().Key(rk).Build())
	}
	res := m.c.DoMulti(m.ctx, cmds...)
	for i, s := range []mState{mPending, mActive, mScheduled, mDead} {
		got, err := res[i].AsStrSlice()
		require.NoError(t, err)
		var want []string
		for _, j := range m.in(s) {
			want = append(want, j.id)
		}
		slices.Sort(got)
		slices.Sort(want)
		require.Equal(t, fmt.Sprint(want), fmt.Sprint(got), "the %s set", s)
	}
	for i, id := range m.order {
		row, err := res[4+i].AsStrMap()
		require.NoError(t, err)
		j := m.jobs[id]
		if j.state == mGone {
			require.Empty(t, row, "job %s was retired", id)
			continue
		}
		require.Equal(t, map[string]string{"state": string(j.state), "attempts": strconv.FormatInt(j.attempts, 10), "payload": j.payload}, row, "job %s", id)
	}
}

var modelSeq atomic.Int64

// TestProtocolModel runs the state machine on the shared standalone server.
func TestProtocolModel(t *testing.T) {
	t.Parallel()
	c := valkeytest.Shared(t).Client(t)
	b := newBus(t, c, bus.Config{})
	t.Run("lanes", func(t *testing.T) { // lanes_model_test.go
		t.Parallel()
		checkLaneModel(t, c, b)
	})
	base := valkeytest.TestName(t)
	rapid.Check(t, func(t *rapid.T) {
		name := base + "." + strconv.FormatInt(modelSeq.Add(1), 10)
		m := &model{jobs: map[string]*mJob{}}
		m.modelCore = newModelCore(t, c, b, name, func(id string) *mJob { return m.jobs[id] })
		require.NoError(t, b.SetMaxAttempts(m.ctx, name, modelMax))
		t.Repeat(map[string]func(*rapid.T){
			"enqueue":      m.enqueue,
			"claim":        m.claim,
			"complete":     m.complete,
			"completeMany": m.completeMany,
			"fail":         m.fail,
			"snooze":       m.snooze,
			"extend":       m.extend,
			"reap":         m.reap,
			"promote":      m.promote,
			"advance":      m.advance,
			"":             m.check,
		})
	})
}
