package echotest

import (
	"crypto/sha1"
	"encoding/hex"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"

	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// mainRun is set by Main: Valkey then hands out one shared server per test binary.
var mainRun atomic.Bool

// Main runs the tests of a package and then stops every server [Valkey] started, also on
// SIGINT or SIGTERM. With it, the package's tests share one server; without it, each call of
// Valkey starts a server of its own. Call it from TestMain:
//
//	func TestMain(m *testing.M) { echotest.Main(m) }
func Main(m *testing.M) {
	mainRun.Store(true)
	valkeytest.Main(m)
}

// Server is a throwaway Valkey server for tests, on a loopback port.
type Server struct {
	// Addr is its host:port.
	Addr string
	srv  *valkeytest.Server
}

// Valkey returns a Valkey server for the test:
//
//   - with VALKEY_ADDR set, the server at that address (tests must then use names of their
//     own, [Name], and never FLUSHALL: other tests share it);
//   - under [Main], one server shared by the package's tests, started on first use and
//     stopped when the tests end;
//   - otherwise a server of the test's own, stopped when the test ends.
//
// A server it starts runs valkey-server from PATH, without persistence worth keeping. When
// valkey-server is not on PATH, the test fails with a message saying how to install it, or,
// under go test -short, is skipped.
func Valkey(tb testing.TB) *Server {
	tb.Helper()
	if os.Getenv("VALKEY_ADDR") == "" {
		if _, err := exec.LookPath("valkey-server"); err != nil {
			const msg = "echotest: valkey-server is not on PATH: install Valkey (Debian: apt-get install valkey-server; or set VALKEY_ADDR to a server for tests)"
			if testing.Short() {
				tb.Skip(msg + "; skipped under -short")
			}
			tb.Fatal(msg)
		}
	}
	var s *valkeytest.Server
	if mainRun.Load() || os.Getenv("VALKEY_ADDR") != "" {
		s = valkeytest.Shared(tb)
	} else {
		s = valkeytest.Start(tb, valkeytest.WithoutPersistence())
	}
	return &Server{Addr: s.Addr, srv: s}
}

// Client returns a new valkey-go client of the server (DisableCache: true), closed when the
// test ends.
func (s *Server) Client(tb testing.TB) valkey.Client {
	tb.Helper()
	return s.srv.Client(tb)
}

// Bus returns a Bus over a new client of the server, with cfg (nil: the defaults).
func (s *Server) Bus(tb testing.TB, cfg *bus.Config) *bus.Bus {
	tb.Helper()
	var c bus.Config
	if cfg != nil {
		c = *cfg
	}
	b, err := bus.New(s.Client(tb), c)
	if err != nil {
		tb.Fatalf("echotest: bus.New: %v", err)
	}
	return b
}

// Name returns a queue, table or topic name made from the test's name, unique to the test
// (subtests included) and valid by the grammar: 1 to 64 bytes of [A-Za-z0-9_.-]. A test
// asking twice gets the same name; a test run again (-count) gets a name of its own (a
// suffix that starts with -r<run>), so each run starts from an empty queue.
func Name(tb testing.TB) string {
	tb.Helper()
	name := valkeytest.TestName(tb)
	if name == tb.Name() {
		return name
	}
	// The name lost bytes the grammar has no place for (a subtest's /, a #, a space) or was
	// cut: tests whose names differ only there (TestA/b/c and TestA/b_c) would share it. A
	// hash of the test's whole name keeps them apart.
	sum := sha1.Sum([]byte(tb.Name()))
	return name[:min(len(name), keys.MaxNameLen-9)] + "." + hex.EncodeToString(sum[:4])
}
