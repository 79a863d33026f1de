package valkeytest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// registry is the package's only global state. It has to be global because
// Main (called from TestMain) and the signal handler must reach every server
// any test of this process started, and Shared/SharedCluster must return one
// instance per process.
var registry struct {
	mu       sync.Mutex
	servers  map[*Server]struct{} // every server started and not yet closed
	root     string               // per-process temp dir holding all data dirs
	mainRun  bool                 // Main is running: shared instances allowed
	stopping bool                 // Main or a signal is stopping everything

	sharedOnce sync.Once
	shared     *Server
	sharedErr  error

	clusterOnce sync.Once
	cluster     *Cluster
	clusterErr  error
}

// Main runs the tests and then stops every server and cluster this process
// started, removes their data, and exits with the tests' exit code. Call it
// from TestMain:
//
//	func TestMain(m *testing.M) { valkeytest.Main(m) }
//
// It also catches SIGINT and SIGTERM, stops every server and exits (with
// 128+signal). [Shared] and [SharedCluster] require Main.
func Main(m *testing.M) {
	registry.mu.Lock()
	registry.mainRun = true
	registry.mu.Unlock()

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go handleSignals(sigs)

	code := m.Run()
	signal.Stop(sigs)
	stopAll()
	os.Exit(code)
}

// handleSignals waits for SIGINT/SIGTERM, stops all servers and exits. The
// servers are in their own process groups, so a terminal's Ctrl-C does not
// reach them; Pdeathsig would kill them anyway, but this also removes their
// data directories. This goroutine lives until the process exits.
func handleSignals(sigs <-chan os.Signal) {
	sig, ok := <-sigs
	if !ok {
		return
	}
	n := stopAll()
	fmt.Fprintf(os.Stderr, "valkeytest: got %v, stopped %d valkey-server(s)\n", sig, n)
	code := 1
	if s, ok := sig.(syscall.Signal); ok {
		code = 128 + int(s)
	}
	os.Exit(code)
}

// stopAll kills every registered server, removes the root temp dir and
// refuses new servers from then on. It returns how many servers it killed.
func stopAll() int {
	registry.mu.Lock()
	registry.stopping = true
	servers := make([]*Server, 0, len(registry.servers))
	for s := range registry.servers {
		servers = append(servers, s)
	}
	root := registry.root
	registry.mu.Unlock()

	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Go(s.closeServer)
	}
	wg.Wait()
	if root != "" {
		_ = os.RemoveAll(root)
	}
	return len(servers)
}

// register records s so that Main can stop it.
func register(s *Server) error {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if registry.stopping {
		return errors.New("valkeytest: stopping (tests finished or signal received); not starting a server")
	}
	if registry.servers == nil {
		registry.servers = make(map[*Server]struct{})
	}
	registry.servers[s] = struct{}{}
	return nil
}

func unregister(s *Server) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	delete(registry.servers, s)
}

// rootDir returns the per-process temp directory for data dirs, making it
// on first use. Its name holds our pid, so that a later run can remove the
// directories of test processes that were killed before Main could.
func rootDir() (string, error) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if registry.root == "" {
		removeStaleRoots()
		dir, err := os.MkdirTemp("", fmt.Sprintf("valkeytest-%d-", os.Getpid()))
		if err != nil {
			return "", err
		}
		registry.root = dir
	}
	return registry.root, nil
}

// removeStaleRoots removes the root dirs of test processes that no longer
// exist (killed hard; their servers died with them through Pdeathsig).
func removeStaleRoots() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "valkeytest-*-*"))
	for _, dir := range dirs {
		pidStr, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(dir), "valkeytest-"), "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.RemoveAll(dir)
		}
	}
}

func requireMain(tb testing.TB, what string) {
	tb.Helper()
	registry.mu.Lock()
	ok := registry.mainRun
	registry.mu.Unlock()
	if !ok {
		tb.Fatalf("valkeytest: %s needs TestMain to call valkeytest.Main(m), which stops the shared instances", what)
	}
}

// Shared returns this process's shared server, starting it on first use;
// [Main] stops it. If VALKEY_ADDR is set, it returns a Server for that
// address instead (its fault methods return errors). Other tests use the
// same server concurrently: use unique key names and never FLUSHALL. Its
// fault methods (Kill, Stop, Continue, Restart) return errors; use [Start]
// for fault tests.
func Shared(tb testing.TB) *Server {
	tb.Helper()
	addr := os.Getenv("VALKEY_ADDR")
	if addr == "" {
		requireMain(tb, "Shared")
	}
	registry.sharedOnce.Do(func() {
		if addr != "" {
			registry.shared, registry.sharedErr = externalServer(addr)
			return
		}
		s, err := startServer(context.Background(), nil, false)
		if err != nil {
			registry.sharedErr = err
			return
		}
		s.shared = true
		registry.shared = s
	})
	if registry.sharedErr != nil {
		tb.Fatalf("valkeytest: shared server: %v", registry.sharedErr)
	}
	return registry.shared
}

// externalServer describes the server at addr (VALKEY_ADDR).
func externalServer(addr string) (*Server, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("VALKEY_ADDR=%q: %w", addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("VALKEY_ADDR=%q: bad port", addr)
	}
	return &Server{Addr: net.JoinHostPort(host, portStr), Port: port, external: true, shared: true}, nil
}

// SharedCluster returns this process's shared 3-primary/3-replica cluster,
// starting it on first use; [Main] stops it. Other tests use it
// concurrently: use unique key names and never FLUSHALL. Fault methods of its
// nodes and [Cluster.Failover] return errors; use [StartCluster] for fault
// tests.
func SharedCluster(tb testing.TB) *Cluster {
	tb.Helper()
	requireMain(tb, "SharedCluster")
	registry.clusterOnce.Do(func() {
		c, err := startCluster(context.Background())
		if err != nil {
			registry.clusterErr = err
			return
		}
		c.shared = true
		for _, n := range c.Nodes {
			n.shared = true
		}
		registry.cluster = c
	})
	if registry.clusterErr != nil {
		tb.Fatalf("valkeytest: shared cluster: %v", registry.clusterErr)
	}
	return registry.cluster
}
