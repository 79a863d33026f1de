package main

import (
	"time"

	"github.com/echocache/echocache/bus"
)

// roundTrips is the worker's round trips per job and the mean number of round trips in flight
// over the drain (their time in flight, added up, over the drain's wall time).
func roundTrips(s bus.WorkerStats, n int, elapsed time.Duration) (perJob, inFlight float64, ok bool) {
	return float64(s.RoundTrips) / float64(n), s.RoundTripTime.Seconds() / elapsed.Seconds(), true
}
