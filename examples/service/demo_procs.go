package main

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// The demo's child processes: a throwaway valkey-server and the service instances, each
// started on a free loopback port and waited for until it answers, and stopped (gracefully,
// or by SIGKILL) when the demo ends or kills one. The run itself is in demo.go.

// proc is a child process the demo started and must stop.
type proc struct {
	name string
	cmd  *exec.Cmd
	addr string
	dead atomic.Bool
}

func (p *proc) kill() {
	if p.cmd.Process != nil && p.dead.CompareAndSwap(false, true) {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
}

// stop asks for a graceful exit, then kills after a grace period.
func (p *proc) stop(grace time.Duration) {
	if p.cmd.Process == nil || !p.dead.CompareAndSwap(false, true) {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func startProc(name string, logDir string, bin string, args ...string) (*proc, error) {
	cmd := exec.Command(bin, args...)
	logf, err := os.Create(filepath.Join(logDir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the demo
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	return &proc{name: name, cmd: cmd}, nil
}

// startValkey runs a throwaway valkey-server without persistence on a free loopback port.
func startValkey(dir string) (*proc, error) {
	bin, err := exec.LookPath("valkey-server")
	if err != nil {
		return nil, errors.New("valkey-server is not installed: run `make demo` (it installs it) or .ci/install-valkey")
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(addr)
	p, err := startProc("valkey", dir, bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	if err != nil {
		return nil, err
	}
	p.addr = addr
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			_, _ = c.Write([]byte("PING\r\n"))
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if strings.HasPrefix(line, "+PONG") {
				return p, nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.kill()
	return nil, fmt.Errorf("valkey-server on %s did not answer PING within 10s (log: %s)", addr, filepath.Join(dir, "valkey.log"))
}

// startInstance runs this binary in serve mode and waits for its health check.
func startInstance(name, dir, valkeyAddr, dbPath string, products int) (*proc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	p, err := startProc(name, dir, self, "serve", "-listen", addr, "-valkey", valkeyAddr, "-db", dbPath,
		"-name", name, "-products", strconv.Itoa(products))
	if err != nil {
		return nil, err
	}
	p.addr = addr
	deadline := time.Now().Add(90 * time.Second) // the first instance seeds the catalog
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		if p.cmd.ProcessState != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.kill()
	return nil, fmt.Errorf("instance %s did not become healthy (log: %s)", name, filepath.Join(dir, name+".log"))
}
