package dash

import "context"

// Passes is how many sampler passes d has done.
func Passes(d *Dashboard) int64 { return d.sampler.passes.Load() }

// Sample runs one sampler pass of d now.
func Sample(ctx context.Context, d *Dashboard) { d.sampler.pass(ctx) }

// Series is queue's throughput samples: completed/s and failed/s, oldest first.
func Series(d *Dashboard, queue string) (completed, failed []float64) {
	for _, s := range d.sampler.series(queue) {
		completed = append(completed, s.Completed)
		failed = append(failed, s.Failed)
	}
	return completed, failed
}
