package bus

import (
	"context"
	"time"
)

// SetServerNow replaces the server's TIME that each pass of s reads, so that a test drives
// passes over any clock (across a daylight-saving change, say). The fire script still checks
// ticks against the real TIME.
func (s *Scheduler) SetServerNow(now func(context.Context) (time.Time, error)) { s.serverNow = now }

// Pass runs one pass of s, as its loop does, and returns how long the loop would sleep.
func (s *Scheduler) Pass(ctx context.Context) (time.Duration, error) { return s.pass(ctx) }
