package browsertest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/dash"
	"github.com/echocache/echocache/echotest"
)

func TestMain(m *testing.M) { echotest.Main(m) }

// chromium is the browser's path. Under make test (ECHO_BROWSER_REQUIRED=1) a missing
// browser fails the test; otherwise it is skipped with the way to install it.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const msg = "chromium is not on PATH: run bash .ci/install-chromium (Debian's chromium package)"
	if os.Getenv("ECHO_BROWSER_REQUIRED") == "1" {
		t.Fatal(msg + " (ECHO_BROWSER_REQUIRED=1: the browser tests may not skip)")
	}
	t.Skip(msg)
	return ""
}

// browser is one headless Chromium with a fresh profile, and the console errors, uncaught
// exceptions and browser-log errors of its pages.
type browser struct {
	ctx    context.Context
	mu     sync.Mutex
	errors []string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	b := &browser{ctx: ctx}
	require.NoError(t, chromedp.Do(ctx), "starting chromium")
	_, err := chromedp.Call(ctx, log.Enable, cdp.Empty{})
	require.NoError(t, err)
	msgs := chromedp.Console(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException {
				b.record(string(m.Type) + ": " + m.Text + " (" + m.URL + ")")
			}
		}
	}()
	t.Cleanup(func() { cancel(); cancelAlloc(); <-done })
	return b
}

func (b *browser) record(s string) {
	b.mu.Lock()
	b.errors = append(b.errors, s)
	b.mu.Unlock()
}

// clean fails the test if a page logged an error since the last call, other than those
// that contain one of allowed (the 403s a refused request logs, which are answers).
func (b *browser) clean(t *testing.T, where string, allowed ...string) {
	t.Helper()
	time.Sleep(100 * time.Millisecond) // the last messages of the page arrive
	b.mu.Lock()
	errs := b.errors
	b.errors = nil
	b.mu.Unlock()
	var bad []string
	for _, e := range errs {
		ok := false
		for _, a := range allowed {
			ok = ok || strings.Contains(e, a)
		}
		if !ok {
			bad = append(bad, e)
		}
	}
	require.Empty(t, bad, "console errors on %s", where)
}

// do runs the steps with a deadline.
func (b *browser) do(t *testing.T, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, steps...))
}

// get runs one action that returns a value, with a deadline.
func get[T any](t *testing.T, b *browser, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	require.NoError(t, err)
	return v
}

// text is the text content of the element with the id (as written, not as styled).
func (b *browser) text(t *testing.T, id string) string {
	t.Helper()
	return strings.TrimSpace(get(t, b, chromedp.TextContent(chromedp.ID(id))))
}

// metrics sets the viewport (0, 0: back to the window's).
func metrics(width, height int64, scale float64, mobile bool) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		if width == 0 {
			_, err := cdp.Call(ctx, t, emulation.ClearDeviceMetricsOverride, cdp.Empty{})
			return err
		}
		_, err := cdp.Call(ctx, t, emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{
			Width: width, Height: height, DeviceScaleFactor: scale, Mobile: mobile})
		return err
	})
}

// post is a script that posts body to url from the page and answers the status.
func post(url, body string) chromedp.Action[int] {
	return chromedp.Evaluate[int](fmt.Sprintf(`fetch(%q, {method: "POST",
		headers: {"Content-Type": "application/x-www-form-urlencoded"}, body: %q}).then(r => r.status)`, url, body),
		chromedp.EvalAwaitPromise)
}

// mount serves d under prefix on a new test server and returns its URL.
func mount(t *testing.T, cfg dash.Config) string {
	t.Helper()
	d, err := dash.New(cfg)
	require.NoError(t, err)
	t.Cleanup(d.Close)
	mux := http.NewServeMux()
	mux.Handle(cfg.Prefix+"/", d)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + cfg.Prefix
}

// state is the job's state in Valkey.
func state(t *testing.T, s seeded, queue string, id fmt.Stringer) bus.State {
	t.Helper()
	jid := s.dead
	if id.String() == s.dead2.String() {
		jid = s.dead2
	}
	info, err := s.bus.Lookup(context.Background(), queue, jid)
	require.NoError(t, err)
	return info.State
}

// css and id are the selectors.
type css = chromedp.CSS
type id = chromedp.ID

// TestDashboardInBrowser drives the dashboard in headless Chromium over a seeded server.
func TestDashboardInBrowser(t *testing.T) {
	b := newBrowser(t)
	s := seed(t, echotest.Valkey(t))
	base := mount(t, dash.Config{Bus: s.bus, Prefix: "/echo", SampleEvery: 250 * time.Millisecond})

	t.Run("the console check sees errors", func(t *testing.T) {
		b.do(t, chromedp.Navigate(base+"/"), chromedp.Evaluate[chromedp.Void](`console.error("probe-error"); setTimeout(() => { throw new Error("probe-throw") })`))
		require.Eventually(t, func() bool {
			b.mu.Lock()
			defer b.mu.Unlock()
			all := strings.Join(b.errors, "\n")
			return strings.Contains(all, "probe-error") && strings.Contains(all, "probe-throw")
		}, 10*time.Second, 20*time.Millisecond, "a console error and an uncaught exception are recorded")
		b.clean(t, "the probe", "probe-")
	})

	t.Run("pages load without console errors", func(t *testing.T) {
		b.do(t, chromedp.Navigate(base+"/"), chromedp.WaitVisible(id("queues")))
		text := get(t, b, chromedp.Text(css("main")))
		for _, want := range []string{"orders", "emails", "reports", "users", "products"} {
			require.Contains(t, text, want)
		}
		// The live refresh replaced the counts at least once, without an error.
		b.do(t, chromedp.WaitVisible(css("#live-status[data-refreshed]")))
		// After the refresh, the lane queue's pending cell still shows its jobs in lanes.
		lanes := get(t, b, chromedp.Evaluate[string](`(e => e.hidden ? "hidden" : e.textContent)(document.querySelector('[data-queue="tenants"] [data-field="lanes"]'))`))
		require.Equal(t, "6 in lanes · 1 urgent", strings.TrimSpace(lanes))
		b.clean(t, "the overview")
		for _, path := range []string{
			"/queues/orders", "/queues/orders?set=active", "/queues/orders?set=scheduled", "/queues/orders?set=dead",
			"/queues/reports", "/queues/emails", "/queues/orders/jobs/" + s.dead.String(), "/tables/users", "/tables/products",
			"/queues/tenants", "/queues/tenants?set=lanes", "/queues/tenants?set=lanes&lset=limits", "/queues/tenants?set=lanes&lset=held",
		} {
			b.do(t, chromedp.Navigate(base+path), chromedp.WaitVisible(css("h1")))
			h1 := get(t, b, chromedp.Text(css("h1")))
			require.NotEmpty(t, h1, path)
			require.NotContains(t, h1, "Not Found", path)
			b.clean(t, path)
		}
	})

	t.Run("live refresh updates the counts without a reload", func(t *testing.T) {
		b.do(t, chromedp.Navigate(base+"/"), chromedp.WaitVisible(id("queues")))
		cell := `document.querySelector('[data-queue="reports"] [data-field="pending"]')`
		before := get(t, b, chromedp.Evaluate[string](cell+`.textContent`))
		require.Equal(t, "1", before)
		b.do(t, chromedp.Evaluate[chromedp.Void](`window.notReloaded = true`))
		for range 5 {
			_, err := s.bus.Enqueue(context.Background(), s.reports, []byte("x"), nil)
			require.NoError(t, err)
		}
		require.True(t, get(t, b, chromedp.Poll[bool](cell+`.textContent === "6"`, chromedp.WithPollingTimeout(15*time.Second))))
		require.True(t, get(t, b, chromedp.Evaluate[bool](`window.notReloaded === true`)), "the same page, not a reload")
		b.clean(t, "the live refresh")
	})

	t.Run("a dead job shows its failure", func(t *testing.T) {
		b.do(t, chromedp.Navigate(base+"/queues/orders/jobs/"+s.dead.String()), chromedp.WaitVisible(id("state")))
		require.Equal(t, "dead", b.text(t, "state"))
		require.Contains(t, b.text(t, "payload"), `"order_id": "ord-01000"`, "the envelope's JSON args, indented")
		failures := b.text(t, "failures")
		require.Contains(t, failures, failReason, "the failure reason is visible")
		require.Contains(t, failures, "attempt 1")
		b.clean(t, "the dead job")
	})

	t.Run("retry with confirmation moves the job to pending", func(t *testing.T) {
		b.do(t, chromedp.Navigate(base+"/queues/orders/jobs/"+s.dead.String()),
			chromedp.WaitVisible(id("retry")),
			chromedp.Focus(id("retry")), chromedp.KeyEvent("\r"), // keyboard-reachable
			chromedp.WaitVisible(id("confirm-dialog")))
		require.Equal(t, bus.StateDead, state(t, s, s.orders, s.dead), "the dialog alone changes nothing")
		b.do(t, chromedp.Click(id("confirm-yes")), chromedp.WaitVisible(id("flash")))
		require.Contains(t, b.text(t, "flash"), "retried 1 dead job of orders")
		require.Equal(t, "pending", b.text(t, "state"), "the page")
		require.Equal(t, bus.StatePending, state(t, s, s.orders, s.dead), "Valkey")
		b.clean(t, "the retry")
	})

	t.Run("cancelling the dialog changes nothing", func(t *testing.T) {
		b.do(t, chromedp.Navigate(base+"/queues/orders/jobs/"+s.dead2.String()),
			chromedp.Click(id("retry")), chromedp.WaitVisible(id("confirm-dialog")),
			chromedp.Click(id("confirm-no")), chromedp.WaitNotVisible(id("confirm-dialog")))
		require.Equal(t, bus.StateDead, state(t, s, s.orders, s.dead2))
		b.clean(t, "the cancelled dialog")
	})

	t.Run("the lanes tab lists the lanes and pauses one through the dialog", func(t *testing.T) {
		b.do(t, chromedp.Navigate(base+"/queues/tenants"), chromedp.WaitVisible(id("tab-lanes")),
			chromedp.Click(id("tab-lanes")), chromedp.WaitVisible(id("lane-rows")))
		require.Contains(t, b.text(t, "flow"), "lane defaults cap 10")
		acme := `document.querySelector('#lane-rows tr[data-lane="acme"]')`
		row := get(t, b, chromedp.Evaluate[string](acme+`.innerText`))
		for _, want := range []string{"acme", "5", "200/1s burst 20", "2", "3"} {
			require.Contains(t, row, want)
		}
		require.Contains(t, get(t, b, chromedp.Evaluate[string](`document.querySelector('#lane-rows tr[data-lane="beta"]').innerText`)), "beta")
		b.clean(t, "the lanes tab")

		b.do(t, chromedp.Click(id("pause-lane-acme")), chromedp.WaitVisible(id("confirm-dialog")))
		require.Contains(t, b.text(t, "confirm-text"), "Pause lane acme of queue tenants?")
		lane, err := s.bus.Lane(context.Background(), s.tenants, "acme")
		require.NoError(t, err)
		require.False(t, lane.Paused, "the dialog alone changes nothing")
		b.do(t, chromedp.Click(id("confirm-yes")), chromedp.WaitVisible(id("flash")))
		require.Contains(t, b.text(t, "flash"), "paused lane acme of tenants")
		lane, err = s.bus.Lane(context.Background(), s.tenants, "acme")
		require.NoError(t, err)
		require.True(t, lane.Paused, "Valkey")
		require.Equal(t, int64(3), lane.Waiting)
		// The page: acme left the round robin; the index of lanes with limits shows it paused,
		// with a resume action.
		require.Zero(t, get(t, b, chromedp.Evaluate[int](`document.querySelectorAll('#lane-rows tr[data-lane="acme"]').length`)))
		b.do(t, chromedp.Click(id("lset-limits")), chromedp.WaitVisible(id("resume-lane-acme")))
		require.Contains(t, get(t, b, chromedp.Evaluate[string](acme+`.textContent`)), "paused")
		b.clean(t, "the lane pause")
	})

	t.Run("a forged POST without the CSRF token is refused", func(t *testing.T) {
		// Same origin, with the cookie, without the token.
		b.do(t, chromedp.Navigate(base+"/queues/orders"))
		status := get(t, b, post(base+"/queues/orders/retry", "confirm=yes&id="+s.dead2.String()))
		require.Equal(t, http.StatusForbidden, status)
		// From another site: a page that submits a form to the dashboard as it loads.
		evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, `<!doctype html><form id="f" method="post" action="%s/queues/orders/retry">
				<input name="confirm" value="yes"><input name="id" value="%s"></form>
				<script>document.getElementById("f").submit()</script>`, strings.Replace(base, "127.0.0.1", "localhost", 1), s.dead2)
		}))
		defer evil.Close()
		b.do(t, chromedp.Navigate(evil.URL), chromedp.WaitVisible(id("error")))
		require.Contains(t, b.text(t, "error"), "cross-origin request refused")
		require.Equal(t, bus.StateDead, state(t, s, s.orders, s.dead2))
		b.clean(t, "the forged posts", "403")
	})

	t.Run("a read-only dashboard refuses the action", func(t *testing.T) {
		ro := mount(t, dash.Config{Bus: s.bus, Prefix: "/ro", ReadOnly: true, SampleEvery: time.Hour})
		b.do(t, chromedp.Navigate(ro+"/queues/orders/jobs/"+s.dead2.String()), chromedp.WaitVisible(id("state")))
		require.Zero(t, get(t, b, chromedp.Evaluate[int](`document.querySelectorAll("form[method=post]").length`)), "no action is offered")
		require.Equal(t, http.StatusForbidden, get(t, b, post(ro+"/queues/orders/retry", "confirm=yes&id="+s.dead2.String())))
		require.Equal(t, bus.StateDead, state(t, s, s.orders, s.dead2))
		b.clean(t, "the read-only dashboard", "403")
	})

	t.Run("phone width", func(t *testing.T) {
		for _, path := range []string{"/", "/queues/orders", "/queues/orders/jobs/" + s.dead2.String(), "/tables/users", "/queues/tenants?set=lanes&lset=limits"} {
			b.do(t, metrics(390, 844, 3, true), chromedp.Navigate(base+path), chromedp.WaitVisible(css("h1")))
			overflow := get(t, b, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth + 1`))
			require.False(t, overflow, "%s scrolls sideways at 390 px (wide tables scroll in their own box)", path)
		}
		b.do(t, metrics(0, 0, 0, false))
		b.clean(t, "phone width")
	})

	t.Run("screenshots", func(t *testing.T) {
		if os.Getenv("ECHO_DASH_SCREENSHOTS") != "1" {
			t.Skip("ECHO_DASH_SCREENSHOTS=1 rewrites docs/dash-overview.png, docs/dash-job.png and docs/dash-lanes.png")
		}
		for _, shot := range []struct{ file, path string }{
			{"dash-overview.png", "/"}, {"dash-job.png", "/queues/orders/jobs/" + s.dead2.String()},
			{"dash-lanes.png", "/queues/tenants?set=lanes&lset=limits"},
		} {
			b.do(t, metrics(1280, 800, 1, false), chromedp.Navigate(base+shot.path), chromedp.WaitVisible(css("h1")),
				chromedp.Sleep(3500*time.Millisecond)) // a live refresh, and throughput samples
			png := get(t, b, chromedp.FullScreenshot(100))
			require.NoError(t, os.WriteFile(filepath.Join("..", "..", "docs", shot.file), png, 0o644))
			t.Logf("wrote docs/%s (%d bytes)", shot.file, len(png))
		}
	})
}
