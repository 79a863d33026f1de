package valkeytest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"
)

const (
	// readyTimeout bounds how long a start or restart waits for PING.
	readyTimeout = 10 * time.Second
	// startAttempts is how many ports a new server tries before giving up.
	// Another test process may take the port between our probe and bind.
	startAttempts = 5
	logName       = "valkey.log"
	stdoutName    = "stdout.log"
)

// errPortInUse means the server could not bind its port (or another server
// answered on it); a new server retries on another port.
var errPortInUse = errors.New("port already in use")

// Server is one valkey-server process on 127.0.0.1, or an external server
// named by VALKEY_ADDR. Its methods are safe for concurrent use.
type Server struct {
	// Addr is host:port of the server, e.g. "127.0.0.1:40123".
	Addr string
	// Port is the TCP port of Addr.
	Port int
	// Dir is the server's data directory (AOF, nodes.conf, valkey.log).
	// Empty for an external server.
	Dir string

	external bool     // VALKEY_ADDR: no process of ours
	shared   bool     // Shared/SharedCluster instance: fault methods refuse
	cluster  bool     // node of a Cluster: Client pins to this node
	busPort  int      // cluster bus port, 0 when not a cluster node
	config   []string // extra "--key value" arguments, in order

	mu      sync.Mutex
	pid     int  // process (and process group) id; 0 when not running
	stopped bool // SIGSTOPped and not yet continued
	closed  bool
}

// Option configures a server made by [Start].
type Option func(*options)

type options struct {
	config []string
}

// WithConfig adds the config line "key value" to the server's command line
// (as --key value). It overrides the defaults, which are: port, bind
// 127.0.0.1, dir, save "", appendonly yes, appendfsync everysec,
// protected-mode no, logfile, enable-debug-command yes.
func WithConfig(key, value string) Option {
	return func(o *options) { o.config = append(o.config, "--"+key, value) }
}

// WithoutPersistence turns AOF and RDB snapshots off (appendonly no,
// save ""). Data does not survive Kill+Restart then.
func WithoutPersistence() Option {
	return func(o *options) { o.config = append(o.config, "--appendonly", "no", "--save", "") }
}

// Start starts a dedicated valkey-server for one test and closes it (kill
// and remove its data directory) on tb.Cleanup. Use it for tests that kill,
// stop or restart the server; other tests should use [Shared].
func Start(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	s, err := startServer(context.Background(), o.config, false)
	if err != nil {
		tb.Fatalf("valkeytest: %v", err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("valkeytest: last lines of %s:\n%s", filepath.Join(s.Dir, logName), s.logTail(20))
		}
		s.closeServer()
	})
	return s
}

// startServer makes a data directory, registers the server (so Main can stop
// it) and starts it, retrying on another port when the port was taken.
// With cluster set, the node gets a cluster bus port and cluster config.
func startServer(ctx context.Context, config []string, cluster bool) (*Server, error) {
	bin, err := serverBinary()
	if err != nil {
		return nil, err
	}
	dir, err := newDataDir()
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: dir, cluster: cluster, config: config}
	if err := register(s); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		n := 1
		if cluster {
			n = 2 // client port and cluster bus port
		}
		ports, err := freePorts(n)
		if err != nil {
			s.closeServer()
			return nil, err
		}
		s.mu.Lock()
		s.Port = ports[0]
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
		if cluster {
			s.busPort = ports[1]
		}
		err = s.launchLocked(ctx, bin)
		s.mu.Unlock()
		if err == nil {
			return s, nil
		}
		if !errors.Is(err, errPortInUse) || attempt == startAttempts {
			s.closeServer()
			return nil, err
		}
	}
}

// serverBinary finds valkey-server on PATH.
func serverBinary() (string, error) {
	bin, err := exec.LookPath("valkey-server")
	if err != nil {
		return "", errors.New("valkey-server not found on PATH: run .ci/install-valkey (or make test, which runs it)")
	}
	return bin, nil
}

// freePorts returns n distinct loopback ports that were free a moment ago.
// They may be taken before the server binds; callers retry on errPortInUse.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		// Keep the listener open until all ports are chosen so they differ.
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// args is the valkey-server command line: defaults first, so that the extra
// config, which comes later, overrides them.
func (s *Server) args() []string {
	a := []string{
		"--port", strconv.Itoa(s.Port),
		"--bind", "127.0.0.1",
		"--dir", s.Dir,
		"--save", "",
		"--appendonly", "yes",
		"--appendfsync", "everysec",
		"--protected-mode", "no",
		"--logfile", filepath.Join(s.Dir, logName),
		"--enable-debug-command", "yes",
	}
	if s.cluster {
		a = append(a,
			"--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(s.Dir, "nodes.conf"),
			"--cluster-node-timeout", "2000",
			"--cluster-port", strconv.Itoa(s.busPort),
		)
	}
	return append(a, s.config...)
}

// launchLocked starts the process on s.Port and waits until it answers PING.
// It returns an error wrapping errPortInUse when the port was taken.
// s.mu must be held.
func (s *Server) launchLocked(ctx context.Context, bin string) error {
	if s.closed {
		return fmt.Errorf("server %s is closed", s.Addr)
	}
	logPath := filepath.Join(s.Dir, logName)
	logStart := fileSize(logPath)
	out, err := os.OpenFile(filepath.Join(s.Dir, stdoutName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, s.args()...)
	cmd.Dir = s.Dir
	cmd.Stdout, cmd.Stderr = out, out // *os.File: no copying goroutines
	// Pdeathsig: the kernel kills the server when this process dies, however
	// it dies. Setpgid: Kill reaches fork children (AOF rewrite) too, and a
	// terminal's Ctrl-C goes to us, not to the server.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	err = cmd.Start()
	out.Close()
	if err != nil {
		return fmt.Errorf("starting valkey-server: %w", err)
	}
	// The process is reaped with wait4 by pid (see reapLocked), which needs no
	// goroutine per server; the pid stays ours until then (zombie).
	s.pid = cmd.Process.Pid
	s.stopped = false
	_ = cmd.Process.Release()

	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	for {
		if exited, status := s.reapLocked(false); exited {
			newLog := readFrom(logPath, logStart)
			if strings.Contains(newLog, "Address already in use") {
				return fmt.Errorf("valkey-server on %s: %w", s.Addr, errPortInUse)
			}
			return fmt.Errorf("valkey-server on %s exited during startup (%s); last lines of %s:\n%s",
				s.Addr, status, logPath, s.logTail(20))
		}
		pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		reply, err := command(pctx, s.Addr, "PING")
		if err == nil && reply == "PONG" {
			// Make sure it is our process that answered, not a server that
			// another test process started on the same port meanwhile.
			var info any
			info, err = command(pctx, s.Addr, "INFO", "server")
			pcancel()
			if err == nil {
				if pid := infoField(fmt.Sprint(info), "process_id"); pid != strconv.Itoa(s.pid) {
					s.killLocked()
					return fmt.Errorf("another server (pid %s) answers on %s: %w", pid, s.Addr, errPortInUse)
				}
				return nil
			}
		}
		pcancel()
		select {
		case <-ctx.Done():
			s.killLocked()
			return fmt.Errorf("valkey-server on %s did not answer PING within %v (last error: %v); last lines of %s:\n%s",
				s.Addr, readyTimeout, err, logPath, s.logTail(20))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// reapLocked collects the exit status of the process if it has exited
// (blocking until it does when block is set). s.mu must be held.
func (s *Server) reapLocked(block bool) (exited bool, status string) {
	if s.pid == 0 {
		return true, "not running"
	}
	flags := syscall.WNOHANG
	if block {
		flags = 0
	}
	for {
		var ws syscall.WaitStatus
		wpid, err := syscall.Wait4(s.pid, &ws, flags, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil { // ECHILD: already reaped elsewhere; treat as gone
			s.pid, s.stopped = 0, false
			return true, err.Error()
		}
		if wpid == 0 {
			return false, ""
		}
		if ws.Stopped() || ws.Continued() {
			continue // wait4 without WUNTRACED does not report these; be safe
		}
		s.pid, s.stopped = 0, false
		if ws.Signaled() {
			return true, "killed by " + ws.Signal().String()
		}
		return true, fmt.Sprintf("exit status %d", ws.ExitStatus())
	}
}

// Close kills the server and removes its data directory. It does nothing on
// an external or shared server (those are stopped by [Main]).
func (s *Server) Close() {
	if s.faultAllowed() != nil {
		return
	}
	s.closeServer()
}

// closeServer kills the process, removes the data directory and unregisters
// the server. Used by Close, test cleanup and Main.
func (s *Server) closeServer() {
	if s.external {
		return
	}
	s.mu.Lock()
	s.killLocked()
	wasClosed := s.closed
	s.closed = true
	s.mu.Unlock()
	if !wasClosed {
		_ = os.RemoveAll(s.Dir)
		unregister(s)
	}
}

// running reports whether the process is running and not stopped, i.e.
// whether it can answer.
func (s *Server) running() bool {
	if s.external {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pid != 0 && !s.stopped
}

// Client returns a new valkey-go client for this server, closed on
// tb.Cleanup. It uses valkey.ClientOption{InitAddress: []string{s.Addr},
// DisableCache: true}; for a node of a [Cluster] it also sets
// ForceSingleClient, so the client talks to that node only (use
// [Cluster.Client] for a cluster client).
func (s *Server) Client(tb testing.TB) valkey.Client {
	tb.Helper()
	return s.ClientWith(tb, nil)
}

// ClientWith is [Server.Client] with the options passed through modify
// before the client is made; modify may be nil.
func (s *Server) ClientWith(tb testing.TB, modify func(*valkey.ClientOption)) valkey.Client {
	tb.Helper()
	opt := valkey.ClientOption{
		InitAddress:       []string{s.Addr},
		DisableCache:      true,
		ForceSingleClient: s.cluster,
	}
	if modify != nil {
		modify(&opt)
	}
	c, err := valkey.NewClient(opt)
	if err != nil {
		tb.Fatalf("valkeytest: client for %s: %v", s.Addr, err)
	}
	tb.Cleanup(c.Close)
	return c
}

// newDataDir makes a fresh directory under this process's root temp dir.
func newDataDir() (string, error) {
	root, err := rootDir()
	if err != nil {
		return "", err
	}
	return os.MkdirTemp(root, "server-")
}
