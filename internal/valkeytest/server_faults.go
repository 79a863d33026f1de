package valkeytest

import (
	"context"
	"fmt"
	"syscall"
)

// The faults a test injects into a server of its own: SIGKILL, SIGSTOP and SIGCONT, and a
// restart on the same port and data directory.

// killLocked SIGKILLs the server's process group and reaps the server.
// s.mu must be held.
func (s *Server) killLocked() {
	if s.pid == 0 {
		return
	}
	_ = syscall.Kill(-s.pid, syscall.SIGKILL)
	s.reapLocked(true)
}

// faultAllowed reports why fault methods may not act on s, if they may not.
func (s *Server) faultAllowed() error {
	switch {
	case s.external:
		return fmt.Errorf("valkeytest: %s is an external server (VALKEY_ADDR); fault methods need one from Start", s.Addr)
	case s.shared:
		return fmt.Errorf("valkeytest: %s is a shared server; fault methods need one from Start or StartCluster", s.Addr)
	}
	return nil
}

// Kill sends SIGKILL to the server (and its fork children) and waits until
// it has exited. Killing a server that is not running does nothing.
func (s *Server) Kill() error {
	if err := s.faultAllowed(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killLocked()
	return nil
}

// Stop sends SIGSTOP to the server: it keeps its connections but answers
// nothing until [Server.Continue].
func (s *Server) Stop() error {
	return s.signal(syscall.SIGSTOP, true)
}

// Continue sends SIGCONT to a server stopped by [Server.Stop].
func (s *Server) Continue() error {
	return s.signal(syscall.SIGCONT, false)
}

func (s *Server) signal(sig syscall.Signal, stopped bool) error {
	if err := s.faultAllowed(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pid == 0 {
		return fmt.Errorf("valkeytest: %s is not running", s.Addr)
	}
	if err := syscall.Kill(-s.pid, sig); err != nil {
		return fmt.Errorf("valkeytest: %s to %s: %w", sig, s.Addr, err)
	}
	s.stopped = stopped
	return nil
}

// Restart kills the server if it is running and starts it again on the same
// port with the same data directory, so data written to the AOF survives
// (unless [WithoutPersistence] was given). It returns when the server answers
// PING, which includes waiting while it loads its data.
func (s *Server) Restart() error {
	if err := s.faultAllowed(); err != nil {
		return err
	}
	bin, err := serverBinary()
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killLocked()
	if err := s.launchLocked(context.Background(), bin); err != nil {
		return fmt.Errorf("valkeytest: restart: %w", err)
	}
	return nil
}
