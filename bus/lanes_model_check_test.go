package bus_test

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"
	"pgregory.net/rapid"

	"github.com/echocache/echocache/keys"
)

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
