package dash_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/dash"
	"github.com/echocache/echocache/internal/valkeytest"
)

// laneQueue makes a queue with lanes and no worker: the queue's rate 1000/1s burst 50, its
// lanes' default cap 10; acme's own cap 5, rate 200/1s burst 20, weight 2. beta's one claimed
// job was handed back RateLimited for an hour (beta is held, 2 waiting); acme has 3 waiting
// and its priority-2 job claimed; one job without a lane waits, and one at priority 1.
func laneQueue(t *testing.T, b *bus.Bus, q string) {
	t.Helper()
	ctx := context.Background()
	enqueue := func(lane string, prio int) {
		t.Helper()
		_, err := b.Enqueue(ctx, q, []byte("job of "+lane), &bus.EnqueueOpts{Lane: lane, Priority: prio})
		require.NoError(t, err)
	}
	claim := func(lane string) bus.Job {
		t.Helper()
		jobs, err := b.Claim(ctx, q, &bus.ClaimOpts{Lease: time.Hour})
		require.NoError(t, err)
		require.Len(t, jobs, 1)
		require.Equal(t, lane, jobs[0].Lane)
		return jobs[0]
	}
	require.NoError(t, b.SetQueueLimits(ctx, q, bus.QueueLimits{Rate: bus.Rate{Limit: 1000, Per: time.Second, Burst: 50}, Lanes: bus.LaneLimits{Cap: 10}}))
	require.NoError(t, b.SetLaneLimits(ctx, q, "acme", bus.LaneLimits{Cap: 5, Rate: bus.Rate{Limit: 200, Per: time.Second, Burst: 20}, Weight: 2}))
	enqueue("beta", 0)
	enqueue("beta", 0)
	_, err := b.RateLimited(ctx, claim("beta"), time.Hour, nil)
	require.NoError(t, err)
	for range 3 {
		enqueue("acme", 0)
	}
	enqueue("", 0)
	enqueue("acme", 2)
	claim("acme")
	enqueue("", 1)
}

var laneRowRe = regexp.MustCompile(`<tr data-lane="([^"]*)">`)

// laneRows are the data-lane values of a page's lane table, in order.
func laneRows(body string) []string {
	out := []string{}
	for _, m := range laneRowRe.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

// cells is the text of the row of lane in body, tags stripped, spaces collapsed.
func cells(t *testing.T, body, lane string) string {
	t.Helper()
	i := strings.Index(body, `<tr data-lane="`+lane+`">`)
	require.GreaterOrEqual(t, i, 0, "row of lane %q", lane)
	row := body[i : i+strings.Index(body[i:], "</tr>")]
	row = regexp.MustCompile(`(?s)<form.*?</form>`).ReplaceAllString(row, " ")
	return strings.Join(strings.Fields(regexp.MustCompile(`<[^>]+>`).ReplaceAllString(row, " ")), " ")
}

// TestLanesTab: the Lanes tab shows only on a queue with lane state; it lists the flow, each
// index's lanes with their limits in force and counts; the overview's row shows the jobs in
// lanes and urgent.
func TestLanesTab(t *testing.T) {
	t.Parallel()
	s := setup(t, valkeytest.Shared(t).Client(t), dash.Config{})
	ctx := context.Background()
	q := name(t, "")
	laneQueue(t, s.bus, q)

	code, body := s.get("/queues/" + q)
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `id="tab-lanes"`)
	require.Contains(t, body, `<span data-field="inlanes">5</span> · <span data-field="urgent">1</span>`)
	require.Contains(t, body, `id="pending-lanes">This list holds the jobs without a lane; of the pending count, 5 wait in lanes and 1 at a priority`,
		"the pending tab says which pending jobs its list leaves out")

	code, body = s.get("/queues/" + q + "?set=lanes")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `<a href="?set=lanes" aria-current="page" class="on" id="tab-lanes">Lanes</a>`)
	require.Contains(t, body, "Queue rate <strong>1000/1s burst 50</strong> · lane defaults <strong>cap 10</strong>")
	require.Contains(t, body, "5 jobs wait in lanes, 1 at a priority; lanes ready 2, held back 1, with claimed jobs 1.")
	require.NotContains(t, body, `id="jobs"`, "no job table on the lanes tab")
	require.Equal(t, []string{"", "acme"}, laneRows(body), "ready: the queue's own stream, then acme")
	require.Equal(t, "acme 5 200/1s burst 20 2 3 1 yes —", cells(t, body, "acme"))
	require.Contains(t, body, `id="pause-lane-acme"`)

	beta, err := s.bus.Lane(ctx, q, "beta")
	require.NoError(t, err)
	_, body = s.get("/queues/" + q + "?set=lanes&lset=held")
	require.Equal(t, []string{"beta"}, laneRows(body))
	require.Contains(t, cells(t, body, "beta"), "beta 10 — 1 2 0 no "+beta.HeldUntil.UTC().Format("2006-01-02 15:04:05.000 UTC"))
	_, body = s.get("/queues/" + q + "?set=lanes&lset=active")
	require.Equal(t, []string{"acme"}, laneRows(body))
	_, body = s.get("/queues/" + q + "?set=lanes&lset=limits")
	require.Equal(t, []string{"acme"}, laneRows(body))
	code, body = s.get("/queues/" + q + "?set=lanes&lset=nope")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `lset: &#34;nope&#34; is not ready, held, active or limits`)
	code, body = s.get("/queues/" + q + "?set=lanes&cursor=x")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `cursor &#34;x&#34;`)

	// The overview's row: pending with its share in lanes and urgent.
	_, body = s.get("/")
	i := strings.Index(body, `<tr data-queue="`+q+`">`)
	require.GreaterOrEqual(t, i, 0)
	row := body[i : i+strings.Index(body[i:], "</tr>")]
	require.Contains(t, row, `<span class="muted small lanes" data-field="lanes"><br><span data-field="inlanes">5</span> in lanes · <span data-field="urgent">1</span> urgent</span>`)

	// A queue without lanes: no tab, the overview's lane line hidden.
	plain := name(t, ".plain")
	_, err = s.bus.Enqueue(ctx, plain, []byte("x"), nil)
	require.NoError(t, err)
	_, body = s.get("/queues/" + plain)
	require.NotContains(t, body, `id="tab-lanes"`)
	require.NotContains(t, body, `data-field="inlanes"`)
	_, body = s.get("/")
	i = strings.Index(body, `<tr data-queue="`+plain+`">`)
	require.Contains(t, body[i:i+strings.Index(body[i:], "</tr>")], `data-field="lanes" hidden`)

	// A queue whose only lane state is a lane's limits (no job): the tab shows.
	limited := name(t, ".limited")
	_, err = s.bus.Enqueue(ctx, limited, []byte("x"), nil)
	require.NoError(t, err)
	require.NoError(t, s.bus.SetLaneLimits(ctx, limited, "solo", bus.LaneLimits{Cap: 1}))
	_, body = s.get("/queues/" + limited)
	require.Contains(t, body, `id="tab-lanes"`)
	_, body = s.get("/queues/" + limited + "?set=lanes&lset=limits")
	require.Equal(t, "solo 1 — 1 0 0 no —", cells(t, body, "solo"))
}

// TestJobPageLane: a job's page names its lane (a link to the lanes tab) and its priority; a
// job without them shows neither.
func TestJobPageLane(t *testing.T) {
	t.Parallel()
	s := setup(t, valkeytest.Shared(t).Client(t), dash.Config{})
	ctx := context.Background()
	q := name(t, "")
	laned, err := s.bus.Enqueue(ctx, q, []byte("x"), &bus.EnqueueOpts{Lane: "acme", Priority: 2})
	require.NoError(t, err)
	plain, err := s.bus.Enqueue(ctx, q, []byte("y"), nil)
	require.NoError(t, err)
	code, body := s.get("/queues/" + q + "/jobs/" + laned.ID.String())
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `<dd id="lane"><a class="mono" href="/echo/queues/`+q+`?set=lanes">acme</a></dd>`)
	require.Contains(t, body, `<dd id="priority">2 <span class="muted">(of 0 to 3)</span></dd>`)
	_, body = s.get("/queues/" + q + "/jobs/" + plain.ID.String())
	require.NotContains(t, body, `id="lane"`)
	require.NotContains(t, body, `id="priority"`)
}

// TestLanesTabPaging: 60 lanes with waiting work page 50 to a page by the ListLanes cursor;
// every lane is listed once.
func TestLanesTabPaging(t *testing.T) {
	t.Parallel()
	s := setup(t, valkeytest.Shared(t).Client(t), dash.Config{})
	ctx := context.Background()
	q := name(t, "")
	var want []string
	for i := range 60 {
		lane := fmt.Sprintf("tenant-%02d", i)
		want = append(want, lane)
		_, err := s.bus.Enqueue(ctx, q, []byte("x"), &bus.EnqueueOpts{Lane: lane})
		require.NoError(t, err)
	}
	_, body := s.get("/queues/" + q + "?set=lanes")
	first := laneRows(body)
	require.Len(t, first, dash.DefaultPageSize)
	m := regexp.MustCompile(`<a href="([^"]+)" id="next">`).FindStringSubmatch(body)
	require.NotNil(t, m, "a next page")
	next := strings.ReplaceAll(m[1], "&amp;", "&")
	require.Equal(t, "?cursor=50&lset=ready&set=lanes", next)
	_, body = s.get("/queues/" + q + next)
	second := laneRows(body)
	require.Len(t, second, 10)
	require.NotContains(t, body, `id="next"`)
	require.Contains(t, body, ">First page</a>")
	require.ElementsMatch(t, want, append(first, second...))
}

// TestLaneActions: pause and resume a lane through the confirmation, seen in Valkey; refused
// without the CSRF token, on a read-only dashboard, unless authorized, and for a bad lane
// name, each changing nothing.
func TestLaneActions(t *testing.T) {
	t.Parallel()
	client := valkeytest.Shared(t).Client(t)
	s := setup(t, client, dash.Config{})
	ctx := context.Background()
	q := name(t, "")
	laneQueue(t, s.bus, q)
	page := "/queues/" + q + "?set=lanes"
	tok := s.token(page)
	paused := func() bool {
		t.Helper()
		l, err := s.bus.Lane(ctx, q, "acme")
		require.NoError(t, err)
		return l.Paused
	}
	pause := "/queues/" + q + "/lanes/pause"

	// Without confirm=yes: the confirmation page, nothing done.
	resp, body := s.post(pause, url.Values{"lane": {"acme"}, "csrf": {tok}, "back": {prefix + page}}, sameOrigin)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, "Pause lane acme of queue "+q+"? Claims skip it while its jobs wait")
	require.False(t, paused(), "asking is not doing")

	// Refusals: no token, read-only, not authorized, a bad lane name.
	resp, body = s.post(pause, url.Values{"lane": {"acme"}, "confirm": {"yes"}}, sameOrigin)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Contains(t, body, "no CSRF token")
	resp, _ = s.post(pause, url.Values{"lane": {"acme"}, "csrf": {tok}, "confirm": {"yes"}}, map[string]string{"Sec-Fetch-Site": "cross-site"})
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	ro := setup(t, client, dash.Config{ReadOnly: true})
	_, body = ro.get(page)
	require.NotContains(t, body, `id="pause-lane-acme"`)
	require.Contains(t, body, `<tr data-lane="acme">`)
	resp, body = ro.post(pause, url.Values{"lane": {"acme"}, "confirm": {"yes"}}, sameOrigin)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Contains(t, body, "read-only")
	var asked atomic.Value
	az := setup(t, client, dash.Config{Authorize: func(r *http.Request, a dash.Action) bool {
		asked.Store(a)
		return a == dash.ActionView || a == dash.ActionResumeLane
	}})
	azTok := az.token(page)
	resp, body = az.post(pause, url.Values{"lane": {"acme"}, "csrf": {azTok}, "confirm": {"yes"}}, sameOrigin)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Contains(t, body, "not authorized to pause-lane")
	require.Equal(t, dash.ActionPauseLane, asked.Load())
	resp, body = s.post(pause, url.Values{"lane": {"bad name"}, "csrf": {tok}, "confirm": {"yes"}}, sameOrigin)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, body, "lane: keys: invalid name")
	require.False(t, paused(), "every refusal changed nothing")

	// Confirmed: paused, back to the lanes tab with the message, the row shows it.
	resp, body = s.post(pause, url.Values{"lane": {"acme"}, "csrf": {tok}, "back": {prefix + page}, "confirm": {"yes"}}, sameOrigin)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	loc := resp.Header.Get("Location")
	require.True(t, strings.HasPrefix(loc, prefix+page+"&done="), loc)
	require.True(t, paused())
	_, body = s.get(strings.TrimPrefix(loc, prefix) + "&lset=limits")
	require.Contains(t, body, "paused lane acme of "+q)
	require.Contains(t, cells(t, body, "acme"), "acme paused 5 200/1s burst 20 2 3 1 no")
	require.Contains(t, body, `id="resume-lane-acme"`)

	// Resume, by an Authorize that allows it.
	resp, _ = az.post("/queues/"+q+"/lanes/resume", url.Values{"lane": {"acme"}, "csrf": {azTok}, "confirm": {"yes"}}, sameOrigin)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.False(t, paused())
}

// TestLaneActionDotNames: lanes may be named "." and "..", which a browser resolves as path
// segments: the pause form of lane ".." posted to ".../lanes/../pause", which is the queue's
// own pause. The lane goes in the form: the action is the same path for every lane, and the
// lane ".." is paused, not the queue.
func TestLaneActionDotNames(t *testing.T) {
	t.Parallel()
	s := setup(t, valkeytest.Shared(t).Client(t), dash.Config{})
	ctx := context.Background()
	q := name(t, "")
	for _, lane := range []string{".", ".."} {
		_, err := s.bus.Enqueue(ctx, q, []byte("x"), &bus.EnqueueOpts{Lane: lane})
		require.NoError(t, err)
	}
	page := "/queues/" + q + "?set=lanes"
	_, body := s.get(page)
	actions := regexp.MustCompile(`<form method="post" action="([^"]+)"[^>]*data-confirm="Pause lane`).FindAllStringSubmatch(body, -1)
	require.Len(t, actions, 2)
	for _, a := range actions {
		require.Equal(t, prefix+"/queues/"+q+"/lanes/pause", a[1], "no lane in the path")
	}
	require.Contains(t, body, `<input type="hidden" name="lane" value="..">`)

	resp, body := s.post("/queues/"+q+"/lanes/pause", url.Values{"lane": {".."}, "csrf": {s.token(page)}, "confirm": {"yes"}}, sameOrigin)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	l, err := s.bus.Lane(ctx, q, "..")
	require.NoError(t, err)
	require.True(t, l.Paused, "the lane .. is paused")
	cs, err := s.bus.Counts(ctx, q)
	require.NoError(t, err)
	require.False(t, cs.Paused, "the queue is not")
}
