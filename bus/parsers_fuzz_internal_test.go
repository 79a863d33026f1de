package bus

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The parsers of values the bus reads back from Valkey: a lane's limits, a failure history
// entry and a schedule's spec. Another client may have written anything there, so each must
// answer an error for what the scripts and the bus never write, never panic, and read back
// what it accepted unchanged. `make fuzz` runs them; `go test` runs their seeds.

// FuzzParseLimits: accepted limits are valid, and written back (as laneset writes them) they
// read the same.
func FuzzParseLimits(f *testing.F) {
	for _, s := range []string{"", "3:200:1000:20::", "::::2:1", ":1::::", "0:::::", "1000001:::::",
		":200:86400001:::", "::1000:::", ":9223372036854775807:9223372036854775807:::", "1:2:3:4:5:6", "a:::::", ":::::"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		l, paused, err := parseLimits(v)
		if err != nil {
			return
		}
		if verr := l.validate("lane"); verr != nil {
			t.Fatalf("parseLimits(%q) accepted invalid limits %+v: %v", v, l, verr)
		}
		_ = l.String()
		_ = l.Rate.Window()
		if v == "" {
			return
		}
		p := ""
		if paused {
			p = "1"
		}
		again := strings.Join(append(l.args(), p), ":")
		l2, paused2, err := parseLimits(again)
		if err != nil || l2 != l || paused2 != paused {
			t.Fatalf("%q read as %+v (paused %v), written back as %q, read as %+v (paused %v): %v", v, l, paused, again, l2, paused2, err)
		}
	})
}

// FuzzParseFailure: an accepted entry written back as fail.lua writes one reads the same.
func FuzzParseFailure(f *testing.F) {
	for _, s := range []string{"1 1700000000000 boom", "2 1700000000000 ", "3 0 lease expired", "x 1 y", "1", "1 2", "-1 -2 a b c", "+1 +2 text with  spaces"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, entry string) {
		fl, ok := parseFailure(entry)
		if !ok {
			return
		}
		again := strconv.FormatInt(fl.Attempt, 10) + " " + strconv.FormatInt(fl.At.UnixMilli(), 10) + " " + fl.Error
		fl2, ok := parseFailure(again)
		if !ok || fl2.Attempt != fl.Attempt || !fl2.At.Equal(fl.At) || fl2.Error != fl.Error {
			t.Fatalf("%q read as %+v, written back as %q, read as %+v", entry, fl, again, fl2)
		}
	})
}

// FuzzPeriodicSpec: an accepted spec survives its JSON round trip, and its ticks keep their
// rules for any last and now: next is after its argument, the fired ticks are in (last, now],
// rising, at most the policy's keep, and a skip is one of the due ticks; and computing them
// takes no more than a moment.
func FuzzPeriodicSpec(f *testing.F) {
	day := int64(24 * time.Hour / time.Millisecond)
	now := time.Date(2026, 12, 7, 15, 0, 0, 0, time.UTC).UnixMilli()
	for _, s := range []periodicSpec{
		{Cron: "*/5 * * * *", Missed: "latest"},
		{Cron: "0 30 2 * * *", Zone: "Europe/Berlin", Missed: "catch_up", CatchUp: 3},
		{Cron: "0 0 30 2 *", Missed: "skip"},
		{Cron: "@hourly", Zone: "Australia/Lord_Howe", Missed: "catch_up"},
		{Cron: "30 2 * 3,10 0", Zone: "America/Santiago", Missed: "catch_up", CatchUp: 1000},
		{EveryMs: 100, Missed: "catch_up", CatchUp: 1000},
		{EveryMs: 86400000, Missed: "skip"},
		{Cron: "* * * * * *", Missed: "catch_up", CatchUp: 7},
		{Cron: "@every 1s", Missed: "latest"},
		{EveryMs: -5, Missed: "latest"},
	} {
		f.Add(s.Cron, s.Zone, s.EveryMs, s.Missed, s.CatchUp, now-3*day, now)
		f.Add(s.Cron, s.Zone, s.EveryMs, s.Missed, s.CatchUp, now-1, now)
	}
	f.Fuzz(func(t *testing.T, cron, zone string, every int64, missed string, catchUp int, last, now int64) {
		in, err := json.Marshal(periodicSpec{Cron: cron, Zone: zone, EveryMs: every, Missed: missed, CatchUp: catchUp})
		if err != nil {
			t.Fatal(err)
		}
		begin := time.Now() // a scheduler's pass computes this: seconds would stall it
		defer func() {
			if d := time.Since(begin); d > 5*time.Second {
				t.Errorf("%s, last %d, now %d: took %v", in, last, now, d)
			}
		}()
		spec, ticks, err := parseSpec(string(in))
		if err != nil {
			return
		}
		out, err := json.Marshal(spec)
		if err != nil {
			t.Fatal(err)
		}
		if spec2, _, err := parseSpec(string(out)); err != nil || spec2 != spec {
			t.Fatalf("%s read as %+v, written back as %s, read as %+v: %v", in, spec, out, spec2, err)
		}
		// The server's clock, give or take: from 1970 to 2100, and a backlog of at most a year
		// of cron ticks (a pass enumerates at most maxDueScan of them before it looks back).
		const end = int64(4102444800000)
		last, now = clamp(last, 0, end), clamp(now, 0, end)
		if ticks.every == 0 {
			last = max(last, now-365*day)
		}
		if n := ticks.next(last); n != -1 && n <= last {
			t.Fatalf("%s: next(%d) = %d", in, last, n)
		}
		fire, skip, dropped := ticks.plan(last, now)
		if dropped < 0 || skip != 0 && dropped < 2 || len(fire) == 0 && skip == 0 && dropped != 0 {
			t.Fatalf("%s: plan(%d, %d) fires %v, skips to %d and passes over %d", in, last, now, fire, skip, dropped)
		}
		keep := 1
		if ticks.missed == MissedCatchUp {
			keep = ticks.catchUp
		}
		if len(fire) > keep {
			t.Fatalf("%s: plan(%d, %d) fires %d ticks, more than %d", in, last, now, len(fire), keep)
		}
		for i, at := range fire {
			if at <= last || at > now || i > 0 && at <= fire[i-1] {
				t.Fatalf("%s: plan(%d, %d) fires %v", in, last, now, fire)
			}
		}
		if skip != 0 && (len(fire) != 0 || skip <= last || skip > now) {
			t.Fatalf("%s: plan(%d, %d) fires %v and skips to %d", in, last, now, fire, skip)
		}
	})
}

func clamp(v, lo, hi int64) int64 { return min(max(v, lo), hi) }
