package browsertest

import "github.com/echocache/echocache/bus"

// failOpts fails a job into dead at once, with reason as its failure.
func failOpts(reason string) *bus.FailOpts {
	return &bus.FailOpts{MaxAttempts: 1}
}
