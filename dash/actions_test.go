package dash_test

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/dash"
	"github.com/echocache/echocache/internal/valkeytest"
)

// sameOrigin are the headers a browser sends with a same-origin form.
var sameOrigin = map[string]string{"Sec-Fetch-Site": "same-origin"}

// TestRetryFlow: a POST with the token but without confirm=yes answers the confirmation page
// and changes nothing; the confirmation's own form retries the job, redirects back and says
// so; the job is pending in Valkey.
func TestRetryFlow(t *testing.T) {
	t.Parallel()
	s := setup(t, valkeytest.Shared(t).Client(t), dash.Config{})
	ctx := context.Background()
	q := name(t, "")
	id := deadJob(t, s.bus, q, []byte("x"))
	job := "/queues/" + q + "/jobs/" + id.String()
	tok := s.token(job)

	resp, body := s.post("/queues/"+q+"/retry", url.Values{"csrf": {tok}, "id": {id.String()}, "back": {prefix + job}}, sameOrigin)
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, `id="question"`)
	require.Contains(t, body, "Retry 1 job "+id.String())
	info, err := s.bus.Lookup(ctx, q, id)
	require.NoError(t, err)
	require.Equal(t, bus.StateDead, info.State, "asking is not doing")

	resp, body = s.post("/queues/"+q+"/retry", url.Values{"csrf": {tok}, "id": {id.String()}, "back": {prefix + job}, "confirm": {"yes"}}, sameOrigin)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	loc := resp.Header.Get("Location")
	require.True(t, strings.HasPrefix(loc, prefix+job+"?done="), loc)
	info, err = s.bus.Lookup(ctx, q, id)
	require.NoError(t, err)
	require.Equal(t, bus.StatePending, info.State)
	_, page := s.get(strings.TrimPrefix(loc, prefix))
	require.Contains(t, page, "retried 1 dead job of "+q)

	// An open redirect is not followed: back must be a path of the dashboard.
	q2 := name(t, ".2")
	other := deadJob(t, s.bus, q2, []byte("y"))
	resp, _ = s.post("/queues/"+q2+"/retry", url.Values{"csrf": {tok}, "id": {other.String()}, "back": {"https://evil.example/"}, "confirm": {"yes"}}, sameOrigin)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.True(t, strings.HasPrefix(resp.Header.Get("Location"), prefix+"/queues/"+q2+"?done="), resp.Header.Get("Location"))
}

// TestCSRF: a POST without the token, with another browser's token, without the cookie, or
// from another site is refused with 403 and changes nothing; GET changes nothing.
func TestCSRF(t *testing.T) {
	t.Parallel()
	client := valkeytest.Shared(t).Client(t)
	s := setup(t, client, dash.Config{})
	ctx := context.Background()
	q := name(t, "")
	id := deadJob(t, s.bus, q, []byte("x"))
	tok := s.token("/queues/" + q)
	other := setup(t, client, dash.Config{}) // another dashboard: another secret
	otherTok := other.token("/queues/" + q)

	cases := []struct {
		name  string
		form  url.Values
		hdr   map[string]string
		fresh bool // a client without the cookie
		want  string
	}{
		{"no token", url.Values{"id": {id.String()}, "confirm": {"yes"}}, sameOrigin, false, "no CSRF token"},
		{"a forged token", url.Values{"csrf": {"AAAA" + tok[4:]}, "id": {id.String()}, "confirm": {"yes"}}, sameOrigin, false, "does not match"},
		{"another dashboard's token", url.Values{"csrf": {otherTok}, "id": {id.String()}, "confirm": {"yes"}}, sameOrigin, false, "does not match"},
		{"no cookie", url.Values{"csrf": {tok}, "id": {id.String()}, "confirm": {"yes"}}, sameOrigin, true, "no CSRF cookie"},
		{"cross-site", url.Values{"csrf": {tok}, "id": {id.String()}, "confirm": {"yes"}}, map[string]string{"Sec-Fetch-Site": "cross-site"}, false, "cross-origin"},
		{"another origin", url.Values{"csrf": {tok}, "id": {id.String()}, "confirm": {"yes"}}, map[string]string{"Origin": "https://evil.example"}, false, "cross-origin"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := s
			if tc.fresh {
				c = &site{t: t, srv: s.srv, http: &http.Client{CheckRedirect: s.http.CheckRedirect}}
			}
			c.t = t
			resp, body := c.post("/queues/"+q+"/retry", tc.form, tc.hdr)
			require.Equal(t, http.StatusForbidden, resp.StatusCode, body)
			require.Contains(t, body, tc.want)
		})
	}
	s.t = t
	resp, err := s.http.Get(s.srv.URL + prefix + "/queues/" + q + "/retry?id=" + id.String() + "&confirm=yes&csrf=" + url.QueryEscape(tok))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "actions are POST only: no page answers a GET")
	info, err := s.bus.Lookup(ctx, q, id)
	require.NoError(t, err)
	require.Equal(t, bus.StateDead, info.State, "nothing was retried")
}

// TestReadOnlyAndAuthorize: a read-only dashboard shows no action and refuses every POST;
// Authorize is asked with the view and with each action.
func TestReadOnlyAndAuthorize(t *testing.T) {
	t.Parallel()
	client := valkeytest.Shared(t).Client(t)
	ctx := context.Background()
	ro := setup(t, client, dash.Config{ReadOnly: true})
	q := name(t, "")
	id := deadJob(t, ro.bus, q, []byte("x"))
	code, body := ro.get("/queues/" + q + "/jobs/" + id.String())
	require.Equal(t, http.StatusOK, code)
	require.NotContains(t, body, `id="retry"`)
	require.NotContains(t, body, `name="csrf"`)
	require.Contains(t, body, "read-only")
	for _, path := range []string{"/retry", "/purge", "/pause", "/resume", "/jobs/" + id.String() + "/cancel"} {
		resp, body := ro.post("/queues/"+q+path, url.Values{"id": {id.String()}, "all": {"1"}, "confirm": {"yes"}}, sameOrigin)
		require.Equal(t, http.StatusForbidden, resp.StatusCode, path)
		require.Contains(t, body, "read-only", path)
	}
	info, err := ro.bus.Lookup(ctx, q, id)
	require.NoError(t, err)
	require.Equal(t, bus.StateDead, info.State)

	var asked atomic.Value
	az := setup(t, client, dash.Config{Authorize: func(r *http.Request, a dash.Action) bool {
		asked.Store(a)
		return a == dash.ActionView || (a == dash.ActionPause && r.Header.Get("X-Role") == "admin")
	}})
	tok := az.token("/queues/" + q)
	require.Equal(t, dash.ActionView, asked.Load())
	resp, body := az.post("/queues/"+q+"/retry", url.Values{"csrf": {tok}, "id": {id.String()}, "confirm": {"yes"}}, sameOrigin)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Contains(t, body, "not authorized to retry")
	require.Equal(t, dash.ActionRetry, asked.Load())
	resp, _ = az.post("/queues/"+q+"/pause", url.Values{"csrf": {tok}, "confirm": {"yes"}}, sameOrigin)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	hdr := map[string]string{"Sec-Fetch-Site": "same-origin", "X-Role": "admin"}
	resp, _ = az.post("/queues/"+q+"/pause", url.Values{"csrf": {tok}, "confirm": {"yes"}}, hdr)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	c, err := az.bus.Counts(ctx, q)
	require.NoError(t, err)
	require.True(t, c.Paused)

	none := setup(t, client, dash.Config{Authorize: func(*http.Request, dash.Action) bool { return false }})
	code, _ = none.get("/")
	require.Equal(t, http.StatusForbidden, code)
	code, _ = none.get("/live?q=" + q)
	require.Equal(t, http.StatusForbidden, code)
}

// TestActions: pause and resume, purge of one and of all, retry of all, cancel of a pending
// job, each seen in Valkey.
func TestActions(t *testing.T) {
	t.Parallel()
	s := setup(t, valkeytest.Shared(t).Client(t), dash.Config{})
	ctx := context.Background()
	q := name(t, "")
	require.NoError(t, s.bus.Resume(ctx, q)) // lists the queue
	tok := s.token("/queues/" + q)
	do := func(path string, form url.Values) string {
		t.Helper()
		form.Set("csrf", tok)
		form.Set("confirm", "yes")
		resp, body := s.post(path, form, sameOrigin)
		require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
		done, err := url.ParseQuery(resp.Header.Get("Location")[strings.Index(resp.Header.Get("Location"), "?")+1:])
		require.NoError(t, err)
		return done.Get("done")
	}
	counts := func() bus.Counts {
		t.Helper()
		c, err := s.bus.Counts(ctx, q)
		require.NoError(t, err)
		return c
	}
	// A queue the registry does not hold (a typo): 404, and nothing is written (no queue is
	// made, nothing paused).
	typo := q + "x"
	form := url.Values{"csrf": {tok}, "confirm": {"yes"}}
	resp, body := s.post("/queues/"+typo+"/pause", form, sameOrigin)
	require.Equal(t, http.StatusNotFound, resp.StatusCode, body)
	require.Contains(t, body, "not in the registry")
	code, body := s.get("/queues/" + typo)
	require.Equal(t, http.StatusNotFound, code, body)
	qs, err := s.bus.Queues(ctx)
	require.NoError(t, err)
	require.False(t, slices.ContainsFunc(qs, func(i bus.QueueInfo) bool { return i.Name == typo }))
	c, err := s.bus.Counts(ctx, typo)
	require.NoError(t, err)
	require.False(t, c.Paused)

	require.Equal(t, "paused "+q, do("/queues/"+q+"/pause", url.Values{}))
	require.True(t, counts().Paused)
	require.Equal(t, "resumed "+q, do("/queues/"+q+"/resume", url.Values{}))
	require.False(t, counts().Paused)

	a := deadJob(t, s.bus, q, []byte("a"))
	deadJob(t, s.bus, q, []byte("b"))
	deadJob(t, s.bus, q, []byte("c"))
	require.Equal(t, "purged 1 dead job of "+q, do("/queues/"+q+"/purge", url.Values{"id": {a.String()}}))
	_, err = s.bus.Lookup(ctx, q, a)
	require.ErrorIs(t, err, bus.ErrNotFound)
	require.Equal(t, "retried 2 dead jobs of "+q, do("/queues/"+q+"/retry", url.Values{"all": {"1"}}))
	require.Equal(t, bus.Counts{Pending: 2}, counts())
	for range 2 {
		jobs, err := s.bus.Claim(ctx, q, nil)
		require.NoError(t, err)
		_, err = s.bus.Fail(ctx, jobs[0], &bus.FailOpts{MaxAttempts: 1})
		require.NoError(t, err)
	}
	require.Equal(t, "purged 2 dead jobs of "+q, do("/queues/"+q+"/purge", url.Values{"all": {"1"}}))
	require.Equal(t, bus.Counts{}, counts())

	e, err := s.bus.Enqueue(ctx, q, []byte("later"), nil)
	require.NoError(t, err)
	require.Equal(t, "cancelled "+e.ID.String()+" (it was pending)", do("/queues/"+q+"/jobs/"+e.ID.String()+"/cancel", url.Values{}))
	require.Equal(t, bus.Counts{}, counts())

	// A running job is asked to stop: cancelling, still active.
	e, err = s.bus.Enqueue(ctx, q, []byte("running"), nil)
	require.NoError(t, err)
	_, err = s.bus.Claim(ctx, q, nil)
	require.NoError(t, err)
	require.Contains(t, do("/queues/"+q+"/jobs/"+e.ID.String()+"/cancel", url.Values{}), "asked "+e.ID.String()+" to stop")
	info, err := s.bus.Lookup(ctx, q, e.ID)
	require.NoError(t, err)
	require.Equal(t, bus.StateCancelling, info.State)

	// A bad id is refused by name, and nothing moves.
	form = url.Values{"csrf": {tok}, "confirm": {"yes"}, "id": {"JOB_nope"}}
	resp, body = s.post("/queues/"+q+"/retry", form, sameOrigin)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode)
	require.Contains(t, body, "id:")
}
