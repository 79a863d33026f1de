package valkeytest

import (
	"testing"
	"time"
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
