package dash_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/dash"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
)

// TestPages: every page renders from a seeded server; the job page pretty-prints a task's JSON
// args; bad names and unknown jobs answer 400 and 404 with the reason; nothing is cached.
func TestPages(t *testing.T) {
	t.Parallel()
	client := valkeytest.Shared(t).Client(t)
	s := setup(t, client, dash.Config{})
	ctx := context.Background()
	q, tbl := name(t, ".q"), name(t, ".t")
	payload, err := bus.Envelope("email.send", []byte(`{"to":"ada@example.com","n":3}`))
	require.NoError(t, err)
	dead := deadJob(t, s.bus, q, payload)
	sched, err := s.bus.Enqueue(ctx, q, []byte("later"), &bus.EnqueueOpts{Delay: time.Hour})
	require.NoError(t, err)
	pending, err := s.bus.Enqueue(ctx, q, []byte("plain <b>text</b>"), nil)
	require.NoError(t, err)
	require.NoError(t, s.bus.DeclarePeriodic(ctx, q, bus.Periodic{Name: "nightly", Cron: "0 3 * * *", Kind: "report", Args: map[string]int{"days": 1}}))
	require.NoError(t, client.Do(ctx, client.B().Zadd().Key(keys.TableRegistry()).Nx().ScoreMember().ScoreMember(1, tbl).Build()).Error())
	cmd := client.B().Eval().Script(lua.Get("cache_stats_report").Source).Numkeys(1).Key(keys.MustTable(tbl).Stats()).
		Arg("cache-1", `{"v":1,"l1_hits":75,"l2_hits":20,"misses":5,"loads":5,"flushes":2,"gaps":1,"invalidations_sent":4}`, "60000", "0").Build()
	require.NoError(t, client.Do(ctx, cmd).Error())

	code, body := s.get("/")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `data-queue="`+q+`"`)
	require.Contains(t, body, `data-table="`+tbl+`"`)
	require.Contains(t, body, "75.0%", "the L1 share of the table")

	code, body = s.get("/queues/" + q + "?set=dead")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, dead.String())
	require.NotContains(t, body, pending.ID.String(), "the dead tab lists dead jobs only")
	require.Contains(t, body, "nightly")
	require.Contains(t, body, "0 3 * * *")
	code, body = s.get("/queues/" + q)
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, pending.ID.String(), "pending is the default tab")
	require.Contains(t, body, "<dt>Dead kept</dt><dd>all</dd>")
	require.NoError(t, s.bus.SetDeadLimit(ctx, q, 10000))
	_, body = s.get("/queues/" + q)
	require.Contains(t, body, "<dt>Dead kept</dt><dd>newest 10,000</dd>", "the queue's dead limit")
	code, body = s.get("/queues/" + q + "?set=scheduled")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, sched.ID.String())
	require.Contains(t, body, "Runs at")
	require.NotContains(t, body, `name="from"`, "schedule is ordered by run-at: no mint-time range")
	jobs, err := s.bus.Claim(ctx, q, nil) // the pending one
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	code, body = s.get("/queues/" + q + "?set=active")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, jobs[0].ID.String())
	require.Contains(t, body, "Lease deadline")
	require.Contains(t, body, `<td class="n">1</td>`, "the holder's token")

	code, body = s.get("/queues/" + q + "/jobs/" + dead.String())
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "email.send")
	require.Contains(t, body, "\n  &#34;to&#34;: &#34;ada@example.com&#34;,", "the args indented")
	require.Contains(t, body, `id="retry"`)
	require.Contains(t, body, "attempt 1,")
	require.Contains(t, body, "smtp said no &lt;550&gt;", "the failure, escaped")
	code, body = s.get("/queues/" + q + "/jobs/" + pending.ID.String())
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "plain &lt;b&gt;text&lt;/b&gt;", "text is escaped")
	require.Contains(t, body, "Lease deadline", "claimed above")
	require.Contains(t, body, `id="cancel"`, "a running job can be cancelled")
	require.Contains(t, body, "This job has not failed.")

	code, body = s.get("/tables/" + tbl)
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "cache-1")
	require.Contains(t, body, "20.0%")

	for path, want := range map[string]int{
		"/queues/bad%7Bname":                                 http.StatusBadRequest,
		"/queues/" + q + "/jobs/nope":                        http.StatusBadRequest,
		"/queues/" + q + "/jobs/" + keys.NewJobID().String(): http.StatusNotFound,
		"/queues/" + q + "?set=nope":                         http.StatusBadRequest,
		"/queues/" + q + "?from=yesterday":                   http.StatusOK, // the page, with the field's error
		"/nothing":                                           http.StatusNotFound,
	} {
		code, body := s.get(path)
		require.Equal(t, want, code, "%s: %s", path, body)
	}
	_, body = s.get("/queues/" + q + "?from=yesterday")
	require.Contains(t, body, "from: &#34;yesterday&#34; is not a time")

	resp, err := http.Get(s.srv.URL + prefix + "/static/dash.js")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

// TestBrowsePaging: pages of a set follow the cursor, newest-first reverses them, and a
// mint-time range narrows them, with no second index.
func TestBrowsePaging(t *testing.T) {
	t.Parallel()
	client := valkeytest.Shared(t).Client(t)
	s := setup(t, client, dash.Config{})
	q := name(t, "")
	var ids []string
	for i := 0; i < dash.DefaultPageSize+5; i++ {
		e, err := s.bus.Enqueue(context.Background(), q, []byte("x"), nil)
		require.NoError(t, err)
		ids = append(ids, e.ID.String())
	}
	_, first := s.get("/queues/" + q)
	require.Contains(t, first, ids[0])
	require.NotContains(t, first, ids[dash.DefaultPageSize])
	end := strings.Index(first, `" id="next"`)
	require.Positive(t, end, "a next link")
	start := strings.LastIndex(first[:end], `href="`) + len(`href="`)
	next := strings.ReplaceAll(first[start:end], "&amp;", "&")
	require.Contains(t, next, "after="+ids[dash.DefaultPageSize-1])
	_, second := s.get("/queues/" + q + next)
	require.Contains(t, second, ids[dash.DefaultPageSize])
	require.Contains(t, second, ids[len(ids)-1])
	require.NotContains(t, second, ids[0])
	require.NotContains(t, second, `id="next"`)

	_, newest := s.get("/queues/" + q + "?newest=1")
	require.Contains(t, newest, ids[len(ids)-1])
	require.NotContains(t, newest, ids[0]+"<", "the oldest is past the first page")

	_, none := s.get("/queues/" + q + "?from=2000-01-01T00:00&to=2000-01-02T00:00")
	require.NotContains(t, none, ids[0])
	require.Contains(t, none, "No job in this set in this range")

	// Active is paged by lease deadline: the cursor carries the last entry's score too.
	claimed := 0
	for claimed < len(ids) {
		jobs, err := s.bus.Claim(context.Background(), q, &bus.ClaimOpts{Count: len(ids) - claimed})
		require.NoError(t, err)
		require.NotEmpty(t, jobs)
		claimed += len(jobs)
	}
	_, first = s.get("/queues/" + q + "?set=active")
	end = strings.Index(first, `" id="next"`)
	require.Positive(t, end, "a next link")
	start = strings.LastIndex(first[:end], `href="`) + len(`href="`)
	next = strings.ReplaceAll(first[start:end], "&amp;", "&")
	require.Contains(t, next, "at=")
	_, second = s.get("/queues/" + q + next)
	seen := 0
	for _, id := range ids {
		in1, in2 := strings.Contains(first, ">"+id+"</a>"), strings.Contains(second, ">"+id+"</a>")
		require.False(t, in1 && in2, "%s on both pages", id)
		if in1 || in2 {
			seen++
		}
	}
	require.Equal(t, len(ids), seen, "every active job on one of the two pages")
	code, body := s.get("/queues/" + q + "?set=active&after=" + ids[0] + "&at=nope")
	require.Equal(t, 200, code)
	require.Contains(t, body, "at: &#34;nope&#34; is not a time in unix ms")
}
