package bus_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
)

// TestPeriodicFire drives periodic_fire by hand: the tick is the fence, a fire writes the job
// row of exactly three fields, and every refusal writes nothing.
func TestPeriodicFire(t *testing.T) {
	t.Parallel()
	ctx, c, b, name, q := periodicSetup(t)
	require.NoError(t, b.DeclarePeriodic(ctx, name, bus.Periodic{Name: "p", Every: time.Second, Payload: []byte("body")}))
	rk, _ := q.Periodic("p")
	last, _ := strconv.ParseInt(schedRow(t, c, q, "p")["last"], 10, 64)
	id := func(tick int64) string { return tickID(name, "p", tick).String() }
	ms := func(n int64) string { return strconv.FormatInt(n, 10) }
	snapshot := func() []string {
		ks := scanAll(t, c, "{"+name+"}")
		out := []string{}
		for _, k := range ks {
			typ, err := c.Do(ctx, c.B().Type().Key(k).Build()).ToString()
			require.NoError(t, err)
			dump, err := c.Do(ctx, c.B().Dump().Key(k).Build()).ToString()
			require.NoError(t, err)
			out = append(out, k+" "+typ+" "+dump)
		}
		return out
	}
	unchanged := func(what string, before []string) {
		t.Helper()
		require.ElementsMatch(t, before, snapshot(), "%s wrote nothing", what)
	}

	// Fenced: the declaration's own millisecond and earlier.
	s0 := snapshot()
	for _, tick := range []int64{last, last - 1, 0} {
		n, err := fireRaw(c, q, rk, ms(tick), id(tick), fireTick)
		require.NoError(t, err)
		require.Equal(t, int64(0), n, "tick %d <= last is fenced", tick)
	}
	unchanged("a fenced fire", s0)

	// Refusals.
	now := serverMillis(t, c)
	other := keys.MustQueue(name + "x")
	for _, tc := range []struct {
		what string
		keys []string
		args []string
		code string
	}{
		{"future tick", nil, []string{ms(now + 60_000), id(now + 60_000), fireTick}, "EMQARGS"},
		{"tick not an integer", nil, []string{"1e5", id(1), fireTick}, "EMQARGS"},
		{"tick of 16 digits", nil, []string{"1000000000000000", id(1), fireTick}, "EMQARGS"},
		{"negative tick", nil, []string{"-5", id(1), fireTick}, "EMQARGS"},
		{"bad id", nil, []string{ms(now), "JOB_x", fireTick}, "EMQARGS"},
		{"bad mode", nil, []string{ms(now), id(now), "again"}, "EMQARGS"},
		{"fire flag of 2", nil, []string{ms(now), id(now), "2"}, "EMQARGS"},
		{"missing ARGV", nil, []string{ms(now), id(now)}, "EMQARGS"},
		{"another queue's pending", []string{rk, other.Pending(), q.Meta(), q.Wake()}, []string{ms(now), id(now), fireTick}, "EMQKEYS"},
		{"not a schedule row", []string{q.Meta(), q.Pending(), q.Meta(), q.Wake()}, []string{ms(now), id(now), fireTick}, "EMQKEYS"},
		{"no such schedule", []string{rk + "2", q.Pending(), q.Meta(), q.Wake()}, []string{ms(now), id(now), fireTick}, "EMQNOSCHED"},
	} {
		ks := tc.keys
		if ks == nil {
			ks = []string{rk, q.Pending(), q.Meta(), q.Wake()}
		}
		err := lua.Get("periodic_fire").Exec(ctx, c, ks, tc.args).Error()
		require.Error(t, err, tc.what)
		require.True(t, strings.HasPrefix(err.Error(), tc.code), "%s: %v", tc.what, err)
	}
	unchanged("a refused fire", s0)

	// A tick job row that exists already: EMQEXISTS, nothing written.
	valkeytest.Eventually(t, 10*time.Second, "a tick after the declaration", func() bool { return serverMillis(t, c) > last+5 })
	t1 := last + 1
	jk, _ := q.Job(tickID(name, "p", t1))
	require.NoError(t, c.Do(ctx, c.B().Hset().Key(jk).FieldValue().FieldValue("state", "pending").Build()).Error())
	s1 := snapshot()
	err := lua.Get("periodic_fire").Exec(ctx, c, []string{rk, q.Pending(), q.Meta(), q.Wake()}, []string{ms(t1), id(t1), fireTick}).Error()
	require.ErrorContains(t, err, "EMQEXISTS")
	unchanged("a fire on an existing row", s1)
	require.NoError(t, c.Do(ctx, c.B().Del().Key(jk).Build()).Error())

	// Fire: the job row has exactly three fields, the id is pending, one wake marker, last moves.
	t2 := last + 2
	n, err := fireRaw(c, q, rk, ms(t2), id(t2), fireTick)
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	jid := tickID(name, "p", t2)
	jk, _ = q.Job(jid)
	hlen, err := c.Do(ctx, c.B().Hlen().Key(jk).Build()).AsInt64()
	require.NoError(t, err)
	require.Equal(t, int64(3), hlen, "HLEN of the fired job row")
	require.Equal(t, map[string]string{"state": "pending", "attempts": "0", "payload": "body"}, row(t, c, q, jid))
	_, ok := score(t, c, q.Pending(), jid)
	require.True(t, ok)
	wake, err := c.Do(ctx, c.B().Lrange().Key(q.Wake()).Start(0).Stop(-1).Build()).AsStrSlice()
	require.NoError(t, err)
	require.Equal(t, []string{"1"}, wake)
	require.Equal(t, ms(t2), schedRow(t, c, q, "p")["last"])
	info, err := b.Lookup(ctx, name, jid)
	require.NoError(t, err)
	require.Equal(t, bus.StatePending, info.State)
	require.Equal(t, t2, jid.Time().UnixMilli(), "the id carries the tick")

	// The same tick again, and an older one: fenced, nothing written (not EMQEXISTS).
	s2 := snapshot()
	for _, tick := range []int64{t2, t1} {
		n, err = fireRaw(c, q, rk, ms(tick), id(tick), fireTick)
		require.NoError(t, err)
		require.Equal(t, int64(0), n)
	}
	unchanged("a second fire of a tick", s2)

	// Skip moves last and enqueues nothing.
	t3 := last + 3
	n, err = fireRaw(c, q, rk, ms(t3), id(t3), skipTick)
	require.NoError(t, err)
	require.Equal(t, int64(2), n)
	require.Equal(t, ms(t3), schedRow(t, c, q, "p")["last"])
	require.Len(t, pendingTicks(t, c, q), 1)

	// A paused schedule fires nothing; resume moves last to the server's time.
	require.NoError(t, b.PausePeriodic(ctx, name, "p"))
	require.NoError(t, b.PausePeriodic(ctx, name, "p"), "pausing twice is not an error")
	s3 := snapshot()
	t4 := last + 4
	n, err = fireRaw(c, q, rk, ms(t4), id(t4), fireTick)
	require.NoError(t, err)
	require.Equal(t, int64(0), n)
	unchanged("a fire of a paused schedule", s3)
	list, err := b.ListPeriodic(ctx, name)
	require.NoError(t, err)
	require.True(t, list[0].Paused)
	before := serverMillis(t, c)
	require.NoError(t, b.ResumePeriodic(ctx, name, "p"))
	resumed, _ := strconv.ParseInt(schedRow(t, c, q, "p")["last"], 10, 64)
	require.GreaterOrEqual(t, resumed, before, "resume moves last to the server's time")
	_, hasPaused := schedRow(t, c, q, "p")["paused"]
	require.False(t, hasPaused)

	// A paused queue still gets the job, but no wake marker.
	require.NoError(t, b.Pause(ctx, name))
	require.NoError(t, c.Do(ctx, c.B().Del().Key(q.Wake()).Build()).Error())
	valkeytest.Eventually(t, 10*time.Second, "a tick after the resume", func() bool { return serverMillis(t, c) > resumed })
	t5 := resumed + 1
	n, err = fireRaw(c, q, rk, ms(t5), id(t5), fireTick)
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	wl, err := c.Do(ctx, c.B().Llen().Key(q.Wake()).Build()).AsInt64()
	require.NoError(t, err)
	require.Zero(t, wl, "no wake marker on a paused queue")

	require.ErrorIs(t, b.PausePeriodic(ctx, name, "nope"), bus.ErrNoSchedule)
	require.ErrorIs(t, b.ResumePeriodic(ctx, name, "nope"), bus.ErrNoSchedule)
}

// TestPeriodicScriptRefusals: upsert, remove and pause check their KEYS against the grammar
// and their ARGV before anything is written.
func TestPeriodicScriptRefusals(t *testing.T) {
	t.Parallel()
	ctx, c, _, name, q := periodicSetup(t)
	other := keys.MustQueue(name + "x")
	rk, _ := q.Periodic("p")
	ork, _ := other.Periodic("p")
	for _, tc := range []struct {
		what, script string
		keys, args   []string
		code         string
	}{
		{"upsert of another queue's row", "periodic_upsert", []string{q.Periodics(), ork}, []string{"{}", "x", "0"}, "EMQKEYS"},
		{"upsert of a bad name", "periodic_upsert", []string{q.Periodics(), q.PeriodicPrefix() + "a:b"}, []string{"{}", "x", "0"}, "EMQKEYS"},
		{"upsert of a long name", "periodic_upsert", []string{q.Periodics(), q.PeriodicPrefix() + strings.Repeat("n", 65)}, []string{"{}", "x", "0"}, "EMQKEYS"},
		{"upsert with pending as index", "periodic_upsert", []string{q.Pending(), rk}, []string{"{}", "x", "0"}, "EMQKEYS"},
		{"upsert of an empty spec", "periodic_upsert", []string{q.Periodics(), rk}, []string{"", "x", "0"}, "EMQARGS"},
		{"upsert with a bad max_payload", "periodic_upsert", []string{q.Periodics(), rk}, []string{"{}", "x", "-1"}, "EMQARGS"},
		{"upsert missing ARGV", "periodic_upsert", []string{q.Periodics(), rk}, []string{"{}", "x"}, "EMQARGS"},
		{"upsert of a large payload", "periodic_upsert", []string{q.Periodics(), rk}, []string{"{}", "xyz", "2"}, "EMQTOOBIG"},
		{"remove of another queue's row", "periodic_remove", []string{q.Periodics(), ork}, nil, "EMQKEYS"},
		{"pause of a meta", "periodic_pause", []string{q.Meta()}, []string{"1"}, "EMQKEYS"},
		{"pause with a bad flag", "periodic_pause", []string{rk}, []string{"2"}, "EMQARGS"},
		{"pause of no schedule", "periodic_pause", []string{rk}, []string{"1"}, "EMQNOSCHED"},
	} {
		err := lua.Get(tc.script).Exec(ctx, c, tc.keys, tc.args).Error()
		require.Error(t, err, tc.what)
		require.True(t, strings.HasPrefix(err.Error(), tc.code), "%s: %v", tc.what, err)
	}
	require.Empty(t, scanAll(t, c, "{"+name+"}", "{"+name+"x}"), "nothing written")

	// A key of the wrong type is refused, and the row is not written.
	require.NoError(t, c.Do(ctx, c.B().Set().Key(q.Periodics()).Value("x").Build()).Error())
	err := lua.Get("periodic_upsert").Exec(ctx, c, []string{q.Periodics(), rk}, []string{"{}", "x", "0"}).Error()
	require.ErrorContains(t, err, "EMQTYPE")
	require.Empty(t, schedRow(t, c, q, "p"))
	require.NoError(t, c.Do(ctx, c.B().Set().Key(rk).Value("x").Build()).Error())
	err = lua.Get("periodic_fire").Exec(ctx, c, []string{rk, q.Pending(), q.Meta(), q.Wake()}, []string{"1", tickID(name, "p", 1).String(), fireTick}).Error()
	require.ErrorContains(t, err, "EMQTYPE")
	require.NoError(t, c.Do(ctx, c.B().Del().Key(q.Periodics(), rk).Build()).Error())
}
