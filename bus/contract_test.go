package bus_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// TestProtocolContract drives every queue script with raw EVALSHA calls built only from the
// script files' headers, on one queue, and the Go API on another, step by step through every
// verb; each step must give the same result, and the two keyspaces must end up the same.
func TestProtocolContract(t *testing.T) {
	t.Parallel()
	valkeytest.OnTargets(t, func(t *testing.T, tg valkeytest.Target) {
		ctx := context.Background()
		c := tg.Client
		b := newBus(t, c, bus.Config{})
		qa, qb := valkeytest.TestName(t)+".go", valkeytest.TestName(t)+".raw"
		la, lb := labels{}, labels{}
		raw := map[string]rawScript{}
		for _, name := range []string{"enqueue", "claim", "complete", "fail", "extend", "snooze", "promote", "reap",
			"pause", "resume", "configure", "cancel", "retry", "purge", "counts", "lookup", "due", "completemany", "browse"} {
			raw[name] = loadRaw(t, c, name)
		}
		// The Go side's defaults, spelled as the raw side must pass them.
		defaults := map[string]string{
			"uniq_ttl_ms": strconv.FormatInt(bus.DefaultUniqueTTL.Milliseconds(), 10),
			"max_payload": strconv.Itoa(bus.DefaultMaxPayload),
		}
		step := func(what string, goRes, rawRes any) {
			t.Helper()
			require.Equal(t, goRes, rawRes, "step %q: the Go API and the raw protocol differ", what)
		}
		// Raw reply readers.
		strs := func(m valkey.ValkeyMessage) []string {
			s, err := m.AsStrSlice()
			require.NoError(t, err)
			return s
		}
		claimedRaw := func(m valkey.ValkeyMessage, err error) []string {
			if err != nil {
				return []string{rawErr(err)}
			}
			a, err := m.ToArray()
			require.NoError(t, err)
			var out []string
			for i := 0; i < len(a); i += 3 {
				id, _ := a[i].ToString()
				p, _ := a[i+1].ToString()
				tok, _ := a[i+2].AsInt64()
				out = append(out, lb.of(id)+" "+p+" "+strconv.FormatInt(tok, 10))
			}
			return out
		}
		claimedGo := func(jobs []bus.Job, err error) []string {
			if err != nil {
				return []string{goErr(err)}
			}
			var out []string
			for _, j := range jobs {
				out = append(out, la.of(j.ID.String())+" "+string(j.Payload)+" "+strconv.FormatInt(j.Token, 10))
			}
			return out
		}
		rawClaim := func(count, lease string) []string {
			return claimedRaw(raw["claim"].call(t, c, qb, map[string]string{"lease_ms": lease, "count": count, "promote_limit": "100"}))
		}
		rawEnqueue := func(delay string, jobs ...[2]string) []string {
			var items []map[string]string
			for _, j := range jobs {
				items = append(items, map[string]string{"id": keys.NewJobID().String(), "payload": j[0], "uniq_key": j[1]})
			}
			m, err := raw["enqueue"].call(t, c, qb, map[string]string{"at_ms": "0", "delay_ms": delay,
				"uniq_ttl_ms": defaults["uniq_ttl_ms"], "max_payload": defaults["max_payload"]}, items...)
			require.NoError(t, err)
			a, err := m.ToArray()
			require.NoError(t, err)
			var out []string
			for _, e := range a {
				pair, _ := e.ToArray()
				id, _ := pair[0].ToString()
				created, _ := pair[1].AsInt64()
				out = append(out, lb.of(id)+" "+strconv.FormatInt(created, 10))
			}
			return out
		}
		goEnqueued := func(out []bus.Enqueued, err error) []string {
			require.NoError(t, err)
			var r []string
			for _, e := range out {
				created := "1"
				if e.Duplicate {
					created = "0"
				}
				r = append(r, la.of(e.ID.String())+" "+created)
			}
			return r
		}
		// held is the Go side's handle and the raw side's (id, token) for the job labelled l.
		idOf := func(l labels, label string) string {
			for id, s := range l {
				if s == label {
					return id
				}
			}
			t.Fatalf("no id labelled %s", label)
			return ""
		}
		job := func(label string, token int64) bus.Job {
			id, err := keys.ParseJobID(idOf(la, label))
			require.NoError(t, err)
			return bus.Job{Queue: qa, ID: id, Token: token}
		}
		rawFenced := func(script, label, token string, extra map[string]string) (valkey.ValkeyMessage, error) {
			vals := map[string]string{"id": idOf(lb, label), "token": token}
			for k, v := range extra {
				vals[k] = v
			}
			return raw[script].call(t, c, qb, vals)
		}
		where := func(m valkey.ValkeyMessage, err error) string {
			if err != nil {
				return rawErr(err)
			}
			a, err := m.ToArray()
			require.NoError(t, err)
			s, _ := a[0].ToString()
			return s
		}
		goWhere := func(o bus.Outcome, err error) string {
			if err != nil {
				return goErr(err)
			}
			return string(o.State)
		}
		counts := func() {
			t.Helper()
			n, err := b.Counts(ctx, qa)
			require.NoError(t, err)
			paused := 0
			if n.Paused {
				paused = 1
			}
			m, err := raw["counts"].call(t, c, qb, nil)
			require.NoError(t, err)
			a, err := m.AsIntSlice()
			require.NoError(t, err)
			require.Len(t, a, 12)
			step("counts", []int64{n.Pending, n.Active, n.Scheduled, n.Dead, int64(paused), int64(n.MaxAttempts), n.InLanes, n.Urgent, n.LanesReady, n.LanesHeld, n.LanesActive, int64(n.DeadLimit)},
				append([]int64{a[0] + a[6] + a[7]}, a[1:]...))
		}
		lookup := func(label string) {
			t.Helper()
			id, _ := keys.ParseJobID(idOf(la, label))
			info, err := b.Lookup(ctx, qa, id)
			require.NoError(t, err)
			m, err := raw["lookup"].call(t, c, qb, map[string]string{"id": idOf(lb, label)})
			require.NoError(t, err)
			a, err := m.ToArray()
			require.NoError(t, err)
			var got []string
			for _, e := range a[:4] {
				s, _ := e.ToString()
				got = append(got, s)
			}
			// The failure history: attempt and text (the times are each side's own).
			for _, e := range strs(a[5]) {
				f := strings.SplitN(e, " ", 3)
				got = append(got, f[0]+" "+f[2])
			}
			want := []string{string(info.State), strconv.FormatInt(info.Attempts, 10), string(info.Payload), setName(info.Set)}
			for _, f := range info.Failures {
				want = append(want, strconv.FormatInt(f.Attempt, 10)+" "+f.Error)
			}
			step("lookup "+label, want, got)
		}

		// Enqueue: a batch with an idempotency key used twice, then a job an hour out.
		step("enqueue batch",
			goEnqueued(b.EnqueueBatch(ctx, qa, []bus.NewJob{{Payload: []byte("p0")}, {Payload: []byte("p1"), UniqueKey: "k"}, {Payload: []byte("p2"), UniqueKey: "k"}}, nil)),
			rawEnqueue("0", [2]string{"p0", ""}, [2]string{"p1", "k"}, [2]string{"p2", "k"}))
		step("enqueue scheduled",
			goEnqueued(one(b.Enqueue(ctx, qa, []byte("p3"), &bus.EnqueueOpts{Delay: time.Hour}))),
			rawEnqueue(strconv.FormatInt(time.Hour.Milliseconds(), 10), [2]string{"p3", ""}))
		counts()
		// The schedule's head: due within the hour on both sides.
		goWait, goOK, err := b.NextDue(ctx, qa)
		require.NoError(t, err)
		dm, err := raw["due"].call(t, c, qb, nil)
		require.NoError(t, err)
		da, err := dm.ToArray()
		require.NoError(t, err)
		require.Len(t, da, 2)
		rawWait, err := da[1].AsInt64()
		require.NoError(t, err)
		within := func(d time.Duration) bool { return d > 0 && d <= time.Hour }
		step("due", []bool{goOK, within(goWait)}, []bool{true, within(time.Duration(rawWait) * time.Millisecond)})

		// Claim, heartbeat, fenced completes.
		step("claim 5", claimedGo(b.Claim(ctx, qa, &bus.ClaimOpts{Count: 5, Lease: time.Minute})), rawClaim("5", "60000"))
		_, lost, err := b.ExtendMany(ctx, []bus.Job{job("#0", 1), job("#1", 1), job("#2", 1)}, &bus.ExtendOpts{Lease: time.Minute})
		require.NoError(t, err)
		var goLost []string
		for _, l := range lost {
			goLost = append(goLost, la.of(l.ID.String()), "EMQSTALE "+string(l.Reason))
		}
		m, err := raw["extend"].call(t, c, qb, map[string]string{"lease_ms": "60000"},
			map[string]string{"id": idOf(lb, "#0"), "token": "1"}, map[string]string{"id": idOf(lb, "#1"), "token": "1"}, map[string]string{"id": idOf(lb, "#2"), "token": "1"})
		require.NoError(t, err)
		a, err := m.ToArray()
		require.NoError(t, err)
		var rawLost []string
		for i, s := range strs(a[1]) {
			if i%2 == 0 {
				s = lb.of(s)
			}
			rawLost = append(rawLost, s)
		}
		step("extend", goLost, rawLost)
		// Browse active: the same jobs in the same order (deadline, then id), with tokens.
		page, err := b.Browse(ctx, qa, &bus.BrowseOpts{Set: keys.Active})
		require.NoError(t, err)
		var goPage []string
		for _, e := range page.Entries {
			goPage = append(goPage, la.of(e.ID.String())+" "+strconv.FormatInt(e.Token, 10))
		}
		m, err = raw["browse"].call(t, c, qb, map[string]string{"set": "0", "newest": "0", "limit": "100", "after_score": "0", "after_id": ""})
		require.NoError(t, err)
		a, err = m.ToArray()
		require.NoError(t, err)
		entries, err := a[1].ToArray()
		require.NoError(t, err)
		var rawPage []string
		for i := 0; i < len(entries); i += 3 {
			id, _ := entries[i].ToString()
			tok, _ := entries[i+2].AsInt64()
			rawPage = append(rawPage, lb.of(id)+" "+strconv.FormatInt(tok, 10))
		}
		step("browse active", goPage, rawPage)
		noResult := map[string]string{"result_ttl_ms": "0", "result": ""}
		step("complete with a wrong token", goErr(b.Complete(ctx, job("#0", 2), nil)), rawErr(second(rawFenced("complete", "#0", "2", noResult))))
		step("complete", goErr(b.Complete(ctx, job("#0", 1), nil)), rawErr(second(rawFenced("complete", "#0", "1", noResult))))
		// A batch of stale completes: both refused, by position, nothing written.
		goRefused, err := b.CompleteMany(ctx, []bus.Job{job("#0", 1), job("#2", 2)}, nil)
		require.NoError(t, err)
		var goMany []string
		for _, e := range goRefused {
			goMany = append(goMany, la.of(e.ID.String())+" EMQSTALE "+string(e.Reason))
		}
		m, err = raw["completemany"].call(t, c, qb, nil,
			map[string]string{"id": idOf(lb, "#0"), "token": "1"}, map[string]string{"id": idOf(lb, "#2"), "token": "2"})
		require.NoError(t, err)
		a, err = m.ToArray()
		require.NoError(t, err)
		retired, err := a[0].AsInt64()
		require.NoError(t, err)
		require.Zero(t, retired)
		refusedRaw, err := a[1].ToArray()
		require.NoError(t, err)
		var rawMany []string
		for i := 0; i < len(refusedRaw); i += 2 {
			pos, err := refusedRaw[i].AsInt64()
			require.NoError(t, err)
			reason, err := refusedRaw[i+1].ToString()
			require.NoError(t, err)
			rawMany = append(rawMany, []string{"#0", "#2"}[pos-1]+" "+reason)
		}
		step("completemany stale", goMany, rawMany)

		// Fail back to pending, claim again (token 2), snooze back to pending.
		step("fail", goWhere(b.Fail(ctx, job("#1", 1), &bus.FailOpts{Error: "first"})),
			where(rawFenced("fail", "#1", "1", map[string]string{"backoff_ms": "0", "max_attempts": "0", "default_max_attempts": strconv.Itoa(bus.DefaultMaxAttempts), "error": "first"})))
		step("claim again", claimedGo(b.Claim(ctx, qa, nil)), rawClaim("1", "30000"))
		step("snooze", goWhere(b.Snooze(ctx, job("#1", 2), 0, nil)), where(rawFenced("snooze", "#1", "2", map[string]string{"delay_ms": "0"})))

		// Pause refuses claims; resume.
		step("pause", goErr(b.Pause(ctx, qa)), rawErr(second(raw["pause"].call(t, c, qb, nil))))
		step("claim paused", claimedGo(b.Claim(ctx, qa, nil)), rawClaim("1", "30000"))
		counts()
		step("resume", goErr(b.Resume(ctx, qa)), rawErr(second(raw["resume"].call(t, c, qb, nil))))

		// A 1 ms lease runs out and reap brings the job back.
		step("claim short", claimedGo(b.Claim(ctx, qa, &bus.ClaimOpts{Lease: time.Millisecond})), rawClaim("1", "1"))
		var goReaped bus.Reaped
		valkeytest.Eventually(t, 10*time.Second, "reap on the Go side", func() bool {
			goReaped, err = b.Reap(ctx, qa, nil)
			require.NoError(t, err)
			return len(goReaped.Requeued) > 0
		})
		var rawReaped []valkey.ValkeyMessage
		valkeytest.Eventually(t, 10*time.Second, "reap on the raw side", func() bool {
			m, err := raw["reap"].call(t, c, qb, map[string]string{"limit": "100", "max_attempts": "0", "default_max_attempts": strconv.Itoa(bus.DefaultMaxAttempts)})
			require.NoError(t, err)
			rawReaped, err = m.ToArray()
			require.NoError(t, err)
			return len(strs(rawReaped[0])) > 0
		})
		step("reap", []string{la.of(goReaped.Requeued[0].String()), strconv.Itoa(len(goReaped.Dead))},
			[]string{lb.of(strs(rawReaped[0])[0]), strconv.Itoa(len(strs(rawReaped[1])))})

		// Cancel the scheduled job; a queue maximum of 1 sends the next failure to dead.
		step("cancel", string(first(b.Cancel(ctx, qa, job("#2", 1).ID))), func() string {
			m, err := raw["cancel"].call(t, c, qb, map[string]string{"id": idOf(lb, "#2")})
			require.NoError(t, err)
			s, _ := m.ToString()
			return s
		}())
		step("cancel again", goErr(second(b.Cancel(ctx, qa, job("#2", 1).ID))), rawErr(second(raw["cancel"].call(t, c, qb, map[string]string{"id": idOf(lb, "#2")}))))
		step("configure", goErr(b.SetMaxAttempts(ctx, qa, 1)), rawErr(second(raw["configure"].call(t, c, qb, map[string]string{"max_attempts": "1", "dead_max": ""}))))
		step("configure dead", goErr(b.SetDeadLimit(ctx, qa, 5)), rawErr(second(raw["configure"].call(t, c, qb, map[string]string{"max_attempts": "", "dead_max": "5"}))))
		step("claim 4th", claimedGo(b.Claim(ctx, qa, nil)), rawClaim("1", "30000"))
		step("fail to dead", goWhere(b.Fail(ctx, job("#1", 4), &bus.FailOpts{Error: "fourth"})),
			where(rawFenced("fail", "#1", "4", map[string]string{"backoff_ms": "0", "max_attempts": "0", "default_max_attempts": strconv.Itoa(bus.DefaultMaxAttempts), "error": "fourth"})))
		lookup("#1")
		counts()

		// Retry from dead keeps attempts; purge.
		step("retry", first(b.RetryDead(ctx, qa, job("#1", 1).ID)), func() int {
			m, err := raw["retry"].call(t, c, qb, nil, map[string]string{"id": idOf(lb, "#1")})
			require.NoError(t, err)
			n, _ := m.AsInt64()
			return int(n)
		}())
		lookup("#1")
		step("claim 5th", claimedGo(b.Claim(ctx, qa, nil)), rawClaim("1", "30000"))
		step("fail to dead again", goWhere(b.Fail(ctx, job("#1", 5), &bus.FailOpts{Error: "fifth"})),
			where(rawFenced("fail", "#1", "5", map[string]string{"backoff_ms": "0", "max_attempts": "0", "default_max_attempts": strconv.Itoa(bus.DefaultMaxAttempts), "error": "fifth"})))
		goPurged, err := b.PurgeDead(ctx, qa, &bus.PurgeOpts{Limit: 10})
		require.NoError(t, err)
		m, err = raw["purge"].call(t, c, qb, map[string]string{"limit": "10"})
		require.NoError(t, err)
		step("purge", []string{la.of(goPurged[0].String())}, []string{lb.of(strs(m)[0])})

		// A job due in 1 ms is promoted.
		step("enqueue soon", goEnqueued(one(b.Enqueue(ctx, qa, []byte("p4"), &bus.EnqueueOpts{Delay: time.Millisecond}))), rawEnqueue("1", [2]string{"p4", ""}))
		var goPromoted []keys.JobID
		valkeytest.Eventually(t, 10*time.Second, "promote on the Go side", func() bool {
			goPromoted, err = b.Promote(ctx, qa, nil)
			require.NoError(t, err)
			return len(goPromoted) > 0
		})
		var rawPromoted []string
		valkeytest.Eventually(t, 10*time.Second, "promote on the raw side", func() bool {
			m, err := raw["promote"].call(t, c, qb, map[string]string{"limit": "100"})
			require.NoError(t, err)
			rawPromoted = strs(m)
			return len(rawPromoted) > 0
		})
		step("promote", la.of(goPromoted[0].String()), lb.of(rawPromoted[0]))
		counts()

		// The two keyspaces are the same, up to the queue name and the ids.
		step("keyspace", normalized(t, tg, qa, la), normalized(t, tg, qb, lb))
	})
}
