package main

import (
	"time"

	"github.com/echocache/echocache/bus"
)

// setPrefetch sets the worker's prefetch when p >= 0; this worker has no such knob yet.
func setPrefetch(cfg *bus.WorkerConfig, p int) {}

// roundTrips is the worker's round trips per job and mean round trips in flight; this worker
// does not count them (its loop waits for each reply: one in flight while it waits).
func roundTrips(s bus.WorkerStats, n int, elapsed time.Duration) (perJob, inFlight float64, ok bool) {
	return 0, 0, false
}
