package bus_test

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
)

// periodicSetup is a bus on the shared server and a queue name no other test uses.
func periodicSetup(t *testing.T) (context.Context, valkey.Client, *bus.Bus, string, keys.Queue) {
	t.Helper()
	c := valkeytest.Shared(t).Client(t)
	name := valkeytest.TestName(t)
	return context.Background(), c, newBus(t, c, bus.Config{}), name, keys.MustQueue(name)
}

// schedRow reads a schedule row with HGETALL.
func schedRow(t *testing.T, c valkey.Client, q keys.Queue, name string) map[string]string {
	t.Helper()
	k, err := q.Periodic(name)
	require.NoError(t, err)
	m, err := c.Do(context.Background(), c.B().Hgetall().Key(k).Build()).AsStrMap()
	require.NoError(t, err)
	return m
}

// setLast writes a schedule row's last tick by hand.
func setLast(t *testing.T, c valkey.Client, q keys.Queue, name string, ms int64) {
	t.Helper()
	k, err := q.Periodic(name)
	require.NoError(t, err)
	require.NoError(t, c.Do(context.Background(), c.B().Hset().Key(k).FieldValue().FieldValue("last", strconv.FormatInt(ms, 10)).Build()).Error())
}

// pendingTicks counts the pending jobs of q by the tick their id carries.
func pendingTicks(t *testing.T, c valkey.Client, q keys.Queue) map[int64]int {
	t.Helper()
	ids, err := c.Do(context.Background(), c.B().Zrange().Key(q.Pending()).Min("0").Max("-1").Build()).AsStrSlice()
	require.NoError(t, err)
	out := map[int64]int{}
	for _, s := range ids {
		id, err := keys.ParseJobID(s)
		require.NoError(t, err)
		out[id.Time().UnixMilli()]++
	}
	return out
}

// tickID is the id a scheduler mints for a tick of schedule name in queue.
func tickID(queue, name string, tick int64) keys.JobID {
	return keys.JobIDAt(tick, []byte(queue+"\x00"+name+"\x00"+strconv.FormatInt(tick, 10)))
}

// The values of periodic_fire's ARGV[3].
const fireTick, skipTick = "1", "0"

// fireRaw calls periodic_fire as any client of the protocol would.
func fireRaw(c valkey.Client, q keys.Queue, row string, tick string, id string, mode string) (int64, error) {
	keys := []string{row, q.Pending(), q.Meta(), q.Wake()}
	return lua.Get("periodic_fire").Exec(context.Background(), c, keys, []string{tick, id, mode}).AsInt64()
}

// TestPeriodicDeclare: a declaration writes one row (spec, payload, last = the server's time)
// and one index entry; declaring again is an upsert that keeps last; the list reads it back.
func TestPeriodicDeclare(t *testing.T) {
	t.Parallel()
	ctx, c, b, name, q := periodicSetup(t)
	before := serverMillis(t, c)
	p := bus.Periodic{Name: "eod.report", Cron: "30 17 * * 1-5", Zone: "Europe/Paris", Kind: "report.eod", Args: map[string]string{"desk": "fx"}}
	require.NoError(t, b.DeclarePeriodic(ctx, name, p))
	after := serverMillis(t, c)
	r := schedRow(t, c, q, "eod.report")
	require.Len(t, r, 3, "spec, payload, last: %v", r)
	require.Equal(t, "report.eod\x00{\"desk\":\"fx\"}", r["payload"])
	last, err := strconv.ParseInt(r["last"], 10, 64)
	require.NoError(t, err)
	require.True(t, before <= last && last <= after, "last %d is the declaration's server time", last)
	var spec map[string]any
	require.NoError(t, json.Unmarshal([]byte(r["spec"]), &spec))
	require.Equal(t, map[string]any{"cron": "30 17 * * 1-5", "zone": "Europe/Paris", "kind": "report.eod", "missed": "latest"}, spec)
	idx, err := c.Do(ctx, c.B().Zrange().Key(q.Periodics()).Min("0").Max("-1").Withscores().Build()).AsZScores()
	require.NoError(t, err)
	require.Equal(t, []valkey.ZScore{{Member: "eod.report", Score: 0}}, idx)

	// The raw replies: -1 unchanged, 0 updated (last kept), 1 created.
	row, _ := q.Periodic("eod.report")
	up := func(spec, payload string) int64 {
		n, err := lua.Get("periodic_upsert").Exec(ctx, c, []string{q.Periodics(), row}, []string{spec, payload, "0"}).AsInt64()
		require.NoError(t, err)
		return n
	}
	require.Equal(t, int64(-1), up(r["spec"], r["payload"]))
	require.NoError(t, b.DeclarePeriodic(ctx, name, p), "a second declaration is not an error")
	p.Args = map[string]string{"desk": "rates"}
	require.NoError(t, b.DeclarePeriodic(ctx, name, p))
	r2 := schedRow(t, c, q, "eod.report")
	require.Equal(t, "report.eod\x00{\"desk\":\"rates\"}", r2["payload"])
	require.Equal(t, r["last"], r2["last"], "an update keeps last")
	require.Equal(t, int64(0), up(r["spec"], r["payload"]))
	require.NoError(t, b.DeclarePeriodic(ctx, name, bus.Periodic{Name: "heartbeat", Every: time.Minute, Payload: []byte("ping"), Missed: bus.MissedCatchUp}))

	list, err := b.ListPeriodic(ctx, name)
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, "eod.report", list[0].Name)
	require.Equal(t, "30 17 * * 1-5", list[0].Cron)
	require.Equal(t, "report.eod", list[0].Kind)
	require.JSONEq(t, `{"desk":"fx"}`, string(list[0].Args.(json.RawMessage)))
	require.Nil(t, list[0].Payload)
	require.Equal(t, last, list[0].Last.UnixMilli())
	paris, _ := time.LoadLocation("Europe/Paris")
	nx := list[0].Next.In(paris)
	require.Equal(t, []int{17, 30, 0}, []int{nx.Hour(), nx.Minute(), nx.Second()})
	require.True(t, nx.Weekday() >= time.Monday && nx.Weekday() <= time.Friday)
	require.True(t, list[0].Next.After(time.UnixMilli(after)))
	require.Equal(t, "heartbeat", list[1].Name)
	require.Equal(t, time.Minute, list[1].Every)
	require.Equal(t, []byte("ping"), list[1].Payload)
	require.Equal(t, bus.MissedCatchUp, list[1].Missed)
	require.Equal(t, bus.DefaultCatchUp, list[1].CatchUp, "CatchUp resolved to its default")
	require.Zero(t, list[1].Next.UnixMilli()%60_000, "Every ticks are aligned to the epoch")
	require.False(t, list[1].Paused)
}

// TestPeriodicBadInput: each refusal names the field and the reason, wraps ErrInvalid, and
// writes nothing.
func TestPeriodicBadInput(t *testing.T) {
	t.Parallel()
	ctx, c, b, name, _ := periodicSetup(t)
	ok := bus.Periodic{Name: "n", Every: time.Second, Payload: []byte("x")}
	with := func(f func(p *bus.Periodic)) bus.Periodic {
		p := ok
		f(&p)
		return p
	}
	for _, tc := range []struct {
		name   string
		p      bus.Periodic
		expect []string
	}{
		{"bad name", with(func(p *bus.Periodic) { p.Name = "a:b" }), []string{"Name", "[A-Za-z0-9_.-]"}},
		{"empty name", with(func(p *bus.Periodic) { p.Name = "" }), []string{"Name", "empty"}},
		{"neither cron nor every", with(func(p *bus.Periodic) { p.Every = 0 }), []string{"Cron, Every", "neither"}},
		{"both cron and every", with(func(p *bus.Periodic) { p.Cron = "@daily" }), []string{"Cron, Every", "both"}},
		{"invalid cron", with(func(p *bus.Periodic) { p.Every, p.Cron = 0, "61 * * * *" }), []string{"Cron", "61"}},
		{"cron fields", with(func(p *bus.Periodic) { p.Every, p.Cron = 0, "* * *" }), []string{"Cron", "expected"}},
		{"cron never", with(func(p *bus.Periodic) { p.Every, p.Cron = 0, "0 0 30 2 *" }), []string{"Cron", "no time"}},
		{"cron tz", with(func(p *bus.Periodic) { p.Every, p.Cron = 0, "CRON_TZ=Asia/Tokyo 0 9 * * *" }), []string{"Cron", "Zone"}},
		{"cron tz short", with(func(p *bus.Periodic) { p.Every, p.Cron = 0, "TZ=UTC 0 9 * * *" }), []string{"Cron", "Zone"}},
		{"cron every", with(func(p *bus.Periodic) { p.Every, p.Cron = 0, "@every 1m" }), []string{"Cron", "@every", "Every"}},
		{"unknown zone", with(func(p *bus.Periodic) { p.Every, p.Cron, p.Zone = 0, "@daily", "Mars/Olympus" }), []string{"Zone", "Mars/Olympus"}},
		{"zone with every", with(func(p *bus.Periodic) { p.Zone = "UTC" }), []string{"Zone", "Cron only"}},
		{"every too short", with(func(p *bus.Periodic) { p.Every = 99 * time.Millisecond }), []string{"Every", "minimum 100ms"}},
		{"every negative", with(func(p *bus.Periodic) { p.Every = -time.Second }), []string{"Every", "negative"}},
		{"every fraction", with(func(p *bus.Periodic) { p.Every = 150*time.Millisecond + 1 }), []string{"Every", "milliseconds"}},
		{"catch-up negative", with(func(p *bus.Periodic) { p.Missed, p.CatchUp = bus.MissedCatchUp, -1 }), []string{"CatchUp", "negative"}},
		{"catch-up too many", with(func(p *bus.Periodic) { p.Missed, p.CatchUp = bus.MissedCatchUp, bus.MaxCatchUp+1 }), []string{"CatchUp", "1001"}},
		{"catch-up without policy", with(func(p *bus.Periodic) { p.CatchUp = 3 }), []string{"CatchUp", "MissedCatchUp only"}},
		{"unknown policy", with(func(p *bus.Periodic) { p.Missed = 9 }), []string{"Missed", "unknown"}},
		{"neither kind nor payload", with(func(p *bus.Periodic) { p.Payload = nil }), []string{"Kind, Payload", "neither"}},
		{"both kind and payload", with(func(p *bus.Periodic) { p.Kind = "k" }), []string{"Kind, Payload", "both"}},
		{"args without kind", with(func(p *bus.Periodic) { p.Args = 1 }), []string{"Args", "without Kind"}},
		{"bad kind", with(func(p *bus.Periodic) { p.Payload, p.Kind = nil, "a b" }), []string{"Kind", "[A-Za-z0-9_.-]"}},
		{"args that do not encode", with(func(p *bus.Periodic) { p.Payload, p.Kind, p.Args = nil, "k", func() {} }), []string{"Kind, Args", "encoding"}},
	} {
		err := b.DeclarePeriodic(ctx, name, tc.p)
		require.ErrorIs(t, err, bus.ErrInvalid, tc.name)
		for _, s := range tc.expect {
			require.Contains(t, err.Error(), s, tc.name)
		}
	}
	err := b.DeclarePeriodic(ctx, name, with(func(p *bus.Periodic) { p.Payload = make([]byte, bus.DefaultMaxPayload+1) }))
	require.ErrorIs(t, err, bus.ErrTooLarge)
	require.ErrorIs(t, b.DeclarePeriodic(ctx, "a b", ok), keys.ErrInvalid)
	_, err = b.PrunePeriodic(ctx, name, []string{"ok", "not ok"})
	require.ErrorIs(t, err, bus.ErrInvalid)
	require.ErrorIs(t, b.PausePeriodic(ctx, name, "a:b"), keys.ErrInvalid)
	_, err = bus.NewScheduler(b, bus.SchedulerConfig{Queue: "a b"})
	require.ErrorIs(t, err, bus.ErrInvalid)
	require.Contains(t, err.Error(), "Queue")
	for _, refresh := range []time.Duration{-time.Second, time.Millisecond} { // a busy loop of index reads
		_, err = bus.NewScheduler(b, bus.SchedulerConfig{Queue: name, Refresh: refresh})
		require.ErrorIs(t, err, bus.ErrInvalid)
		require.Contains(t, err.Error(), "Refresh")
	}
	require.Empty(t, scanAll(t, c, "{"+name+"}"), "nothing written")
}

// TestPeriodicConcurrentDeclare: 10 declarers, each with a client and a Bus of its own (as
// 10 processes would be: the upserts meet only on the server), declare the same 3 schedules
// at once; one row and one index entry each; then a scheduler fires each tick of each once.
func TestPeriodicConcurrentDeclare(t *testing.T) {
	t.Parallel()
	ctx, c, b, name, q := periodicSetup(t)
	scheds := []string{"a", "b", "c"}
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 30)
	for range 10 {
		own := newBus(t, valkeytest.Shared(t).Client(t), bus.Config{})
		wg.Go(func() {
			<-start
			for _, s := range scheds {
				errs <- own.DeclarePeriodic(ctx, name, bus.Periodic{Name: s, Every: 200 * time.Millisecond, Kind: "tick", Args: s, Missed: bus.MissedCatchUp})
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	n, err := c.Do(ctx, c.B().Zcard().Key(q.Periodics()).Build()).AsInt64()
	require.NoError(t, err)
	require.Equal(t, int64(3), n)
	require.Len(t, scanAll(t, c, "{"+name+"}:periodic:"), 3, "one row per schedule")
	lasts := map[string]int64{}
	for _, s := range scheds {
		r := schedRow(t, c, q, s)
		require.Len(t, r, 3)
		lasts[s], _ = strconv.ParseInt(r["last"], 10, 64)
	}

	sc, err := bus.NewScheduler(b, bus.SchedulerConfig{Queue: name})
	require.NoError(t, err)
	require.NoError(t, sc.Start())
	t.Cleanup(func() { _ = sc.Close(context.Background()) })
	valkeytest.Eventually(t, 30*time.Second, "6 ticks of each schedule", func() bool { return sc.Stats().Fired >= 18 })
	require.NoError(t, sc.Close(ctx))
	st := sc.Stats()
	got := pendingTicks(t, c, q)
	total := 0
	for _, s := range scheds {
		r := schedRow(t, c, q, s)
		last, _ := strconv.ParseInt(r["last"], 10, 64)
		for tick := (lasts[s]/200 + 1) * 200; tick <= last; tick += 200 {
			id := tickID(name, s, tick)
			_, ok := score(t, c, q.Pending(), id)
			require.True(t, ok, "schedule %s tick %d fired", s, tick)
			require.Equal(t, "tick\x00\""+s+"\"", row(t, c, q, id)["payload"])
			total++
		}
	}
	sum := 0
	for _, v := range got {
		sum += v
	}
	require.Equal(t, total, sum, "no job beyond the ticks")
	require.Equal(t, int64(total), st.Fired, "each tick fired once")
	require.Zero(t, st.Errors)
}

// TestPeriodicRemovePrune: remove deletes the row and the index entry and keeps the jobs;
// prune removes what a deployment no longer declares.
func TestPeriodicRemovePrune(t *testing.T) {
	t.Parallel()
	ctx, c, b, name, q := periodicSetup(t)
	for _, s := range []string{"a", "b", "c", "d"} {
		require.NoError(t, b.DeclarePeriodic(ctx, name, bus.Periodic{Name: s, Cron: "@hourly", Payload: []byte(s)}))
	}
	ok, err := b.RemovePeriodic(ctx, name, "a")
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = b.RemovePeriodic(ctx, name, "a")
	require.NoError(t, err)
	require.False(t, ok, "removing twice answers false")
	require.Empty(t, schedRow(t, c, q, "a"))
	gone, err := b.PrunePeriodic(ctx, name, []string{"b", "zz"})
	require.NoError(t, err)
	require.Equal(t, []string{"c", "d"}, gone)
	list, err := b.ListPeriodic(ctx, name)
	require.NoError(t, err)
	require.Len(t, list, 1)
	require.Equal(t, "b", list[0].Name)
	gone, err = b.PrunePeriodic(ctx, name, []string{"b"})
	require.NoError(t, err)
	require.Empty(t, gone)
	rb, _ := q.Periodic("b")
	left := scanAll(t, c, "{"+name+"}")
	slices.Sort(left)
	require.Equal(t, []string{rb, q.Periodics()}, left)
}
