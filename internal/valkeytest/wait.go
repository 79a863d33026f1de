package valkeytest

import (
	"crypto/sha1"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/keys"
)

// Eventually polls cond every 2 ms until it holds, and fails the test when d passes first.
// It is the one polling helper of the project's tests: wait on an event (a channel, a hook)
// where one exists, and poll only state that announces nothing.
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Target is one deployment a test runs against: the shared standalone server or the shared
// loopback cluster.
type Target struct {
	Name   string // "standalone" or "cluster"
	Client valkey.Client
}

// OnTargets runs fn as parallel subtests against the shared standalone server and the shared
// loopback cluster, so a protocol case is shown to hold on both.
func OnTargets(t *testing.T, fn func(t *testing.T, tg Target)) {
	t.Helper()
	for _, name := range []string{"standalone", "cluster"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var c valkey.Client
			if name == "cluster" {
				c = SharedCluster(t).Client(t)
			} else {
				c = Shared(t).Client(t)
			}
			fn(t, Target{Name: name, Client: c})
		})
	}
}

// TestName derives a queue, topic or table name from the test's name: [A-Za-z0-9_.-], at most
// 64 bytes (a long name keeps a hash suffix so it stays unique). Subtests get names of their
// own; one test asking twice gets the same name. A test that runs again in the same process
// (go test -count=N) gets a fresh name, "-r<run>" added, so it never meets the keys its
// earlier run left on the shared server.
func TestName(t testing.TB) string {
	t.Helper()
	testNames.Lock()
	defer testNames.Unlock()
	if name, ok := testNames.byTest[t]; ok {
		return name
	}
	name := baseName(t.Name())
	testNames.runs[name]++
	if run := testNames.runs[name]; run > 1 {
		name = baseName(t.Name() + "-r" + strconv.Itoa(run))
	}
	testNames.byTest[t] = name // kept: a cleanup may still ask
	return name
}

// testNames remembers the name each running test was given, and how many runs each base name
// had in this process.
var testNames = struct {
	sync.Mutex
	byTest map[testing.TB]string
	runs   map[string]int
}{byTest: map[testing.TB]string{}, runs: map[string]int{}}

// baseName is s in the name alphabet, at most keys.MaxNameLen bytes.
func baseName(s string) string {
	var b strings.Builder
	for _, c := range s {
		if c < 128 && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			b.WriteRune(c)
		} else {
			b.WriteByte('_')
		}
	}
	name := b.String()
	if len(name) > keys.MaxNameLen {
		sum := sha1.Sum([]byte(name))
		name = name[:keys.MaxNameLen-9] + "." + hex.EncodeToString(sum[:4])
	}
	return name
}

// TimingEnv names the variable under which the timing tests run: tests whose assertions are
// bounds on time (a pickup's latency, claims per second of a rate) measure the machine as
// much as the code when other tests load it, so `make test` runs them in a stage of their
// own, alone and without the race detector, with TimingEnv=1, and skips them in the
// parallel run.
const TimingEnv = "ECHO_TIMING"

// Timing marks t as a timing test: skipped unless TimingEnv is "1" (`make test` sets it in
// its timing stage; `go test -run <name>` with ECHO_TIMING=1 runs one by hand).
func Timing(t testing.TB) {
	t.Helper()
	if os.Getenv(TimingEnv) != "1" {
		t.Skipf("a timing test: make test runs it alone (%s=1)", TimingEnv)
	}
}
