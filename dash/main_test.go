package dash_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/dash"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
)

func TestMain(m *testing.M) { valkeytest.Main(m) }

// prefix is where the tests mount the dashboard.
const prefix = "/echo"

// site is a dashboard on a server, mounted under prefix, with a browser-like client (a
// cookie jar).
type site struct {
	t      *testing.T
	client valkey.Client
	bus    *bus.Bus
	dash   *dash.Dashboard
	srv    *httptest.Server
	http   *http.Client
}

// setup starts a dashboard with cfg (Bus and Prefix filled in) on client.
func setup(t *testing.T, client valkey.Client, cfg dash.Config) *site {
	t.Helper()
	b, err := bus.New(client, bus.Config{})
	require.NoError(t, err)
	cfg.Bus, cfg.Prefix = b, prefix
	d, err := dash.New(cfg)
	require.NoError(t, err)
	t.Cleanup(d.Close)
	mux := http.NewServeMux()
	mux.Handle(prefix+"/", d)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &site{t: t, client: client, bus: b, dash: d, srv: srv, http: hc}
}

// get fetches path (below prefix) and returns the status and body.
func (s *site) get(path string) (int, string) {
	s.t.Helper()
	resp, err := s.http.Get(s.srv.URL + prefix + path)
	require.NoError(s.t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(s.t, err)
	return resp.StatusCode, string(body)
}

// post sends form to path (below prefix) with the browser's headers of a same-origin form.
func (s *site) post(path string, form url.Values, hdr map[string]string) (*http.Response, string) {
	s.t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.srv.URL+prefix+path, strings.NewReader(form.Encode()))
	require.NoError(s.t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := s.http.Do(req)
	require.NoError(s.t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(s.t, err)
	return resp, string(body)
}

var tokenRe = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// token loads path and returns the CSRF token of its forms.
func (s *site) token(path string) string {
	s.t.Helper()
	code, body := s.get(path)
	require.Equal(s.t, http.StatusOK, code, body)
	m := tokenRe.FindStringSubmatch(body)
	require.NotNil(s.t, m, "the page %s has a form with a CSRF token", path)
	return m[1]
}

// deadJob enqueues a job with payload on queue, claims it and fails it into dead.
func deadJob(t *testing.T, b *bus.Bus, queue string, payload []byte) keys.JobID {
	t.Helper()
	ctx := context.Background()
	e, err := b.Enqueue(ctx, queue, payload, nil)
	require.NoError(t, err)
	jobs, err := b.Claim(ctx, queue, &bus.ClaimOpts{Count: 1})
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.Equal(t, e.ID, jobs[0].ID)
	out, err := b.Fail(ctx, jobs[0], &bus.FailOpts{MaxAttempts: 1, Error: "smtp said no <550>"})
	require.NoError(t, err)
	require.Equal(t, bus.StateDead, out.State)
	return e.ID
}

// report publishes a worker snapshot of queue as a worker does (workers_report).
func report(t *testing.T, client valkey.Client, queue, id, snapshot string) {
	t.Helper()
	cmd := client.B().Eval().Script(lua.Get("workers_report").Source).Numkeys(1).Key(keys.MustQueue(queue).Workers()).
		Arg(id, snapshot, "60000", "0").Build()
	require.NoError(t, client.Do(context.Background(), cmd).Error())
}

// name is a queue or table name of this test, unique across runs (the registries outlive
// a run).
func name(t *testing.T, suffix string) string {
	t.Helper()
	id := keys.NewJobID().String()
	base := strings.NewReplacer("/", ".", " ", "_").Replace(t.Name())
	if len(base) > 40 {
		base = base[len(base)-40:]
	}
	return base + "." + id[len(id)-6:] + suffix
}
