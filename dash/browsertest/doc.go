// Package browsertest drives the dashboard (package dash) in headless Chromium against a real
// Valkey with seeded queues and tables. It is a module of its own so that chromedp stays out
// of the core go.mod; make test runs it with ECHO_BROWSER_REQUIRED=1, which turns a missing
// chromium into a failure instead of a skip. ECHO_DASH_SCREENSHOTS=1 rewrites the screenshots
// under docs/.
package browsertest
