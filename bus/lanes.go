package bus

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/echocache/echocache/keys"
)

// Lanes: a lane is a named sub-stream of one queue (a tenant, an account, a partner), stamped
// on a job at enqueue ([EnqueueOpts.Lane]), with limits of its own: a cap on how many of its
// jobs are claimed at once, fleet-wide; a rate of claims; a weight in the round robin that
// serves the lanes with waiting work in turn; a pause. A queue may also have a rate of its own,
// and default limits for every lane. A job may carry a priority ([EnqueueOpts.Priority]): a
// job of a higher priority is claimed before any job of a lower one whose lane could give it.
// Everything stays under the queue's hash tag and in the scripts of package lua (FORMAT lanes
// in lua/laneclaim.lua is the whole scheme); a job without a lane or a priority, in a queue
// without lanes, is claimed as it always was. See the package doc, "Lanes".

// Bounds of the limits, the same as the scripts'.
const (
	// MaxPriority is the highest priority: 0 (the default) to 3.
	MaxPriority = 3
	// MaxLaneCap bounds LaneLimits.Cap.
	MaxLaneCap = 1_000_000
	// MaxRateLimit bounds Rate.Limit.
	MaxRateLimit = 1_000_000
	// MaxRatePer bounds Rate.Per: a day.
	MaxRatePer = 24 * time.Hour
	// MaxRateBurst bounds Rate.Burst.
	MaxRateBurst = 100_000
	// MaxLaneWeight bounds LaneLimits.Weight.
	MaxLaneWeight = 1000
	// MaxRateLimited bounds the Delay of [RateLimited]: a day.
	MaxRateLimited = 24 * time.Hour
	// DefaultRatePer is a Rate's period when it names none.
	DefaultRatePer = time.Second
	// DefaultRateBurst is a Rate's burst when it names none: claims spaced Per/Limit apart.
	DefaultRateBurst = 1
)

// errFlowControl is claim's EMQLANES: the queue keeps lane state, and laneclaim claims it.
var errFlowControl = errors.New("bus: the queue uses lanes")

// Rate limits claims: at most Limit per Per over the long run, and never more than Burst in
// any window of Burst × Per / Limit, on the server's clock (FORMAT lanerate). With the default
// Burst of 1, claims are spaced Per/Limit apart; a Burst of 20 at 200 a second lets 20 go at
// once and then no more for 100 ms. The zero Rate is no rate.
type Rate struct {
	// Limit is how many claims per Per; 1 to [MaxRateLimit]. 0: no rate (Per and Burst must
	// then be 0).
	Limit int
	// Per is the period of Limit, in whole milliseconds, up to a day. Default 1 s
	// ([DefaultRatePer]).
	Per time.Duration
	// Burst is how many claims may go at once; 1 to [MaxRateBurst]. Default 1
	// ([DefaultRateBurst]).
	Burst int
}

// IsZero reports whether r is no rate.
func (r Rate) IsZero() bool { return r == Rate{} }

// String is r as "200/1s burst 20" (the burst only when set, Per's default filled in), or
// "none" for the zero Rate.
func (r Rate) String() string {
	if r.IsZero() {
		return "none"
	}
	s := fmt.Sprintf("%d/%v", r.Limit, cmp.Or(r.Per, DefaultRatePer))
	if r.Burst > 0 {
		s += fmt.Sprintf(" burst %d", r.Burst)
	}
	return s
}

// Window is the span in which at most Burst claims fall: Burst × Per / Limit (defaults
// applied); 0 for the zero Rate.
func (r Rate) Window() time.Duration {
	if r.Limit <= 0 {
		return 0
	}
	per, burst := r.Per, r.Burst
	if per == 0 {
		per = DefaultRatePer
	}
	if burst == 0 {
		burst = DefaultRateBurst
	}
	return time.Duration(float64(per) * float64(burst) / float64(r.Limit))
}

// LaneLimits are a lane's limits. A zero field is unset: the lane then takes the queue's
// default for lanes ([QueueLimits.Lanes]) for that field, else none. The zero LaneLimits
// clears a lane's own limits.
type LaneLimits struct {
	// Cap is the most jobs of the lane claimed at once, fleet-wide and exact: a claim never
	// hands out a job of a lane at its cap, and every script that takes a job out of active
	// (complete, fail, snooze, reap of an expired lease, RateLimited) gives the slot back.
	// 1 to [MaxLaneCap]; 0: unset (no cap unless the queue's default sets one).
	Cap int
	// Rate bounds the lane's claims; the zero Rate is unset.
	Rate Rate
	// Weight is the lane's share of the round robin: a lane of weight 2 gets two turns (of up
	// to 32 jobs each) for another's one. 1 to [MaxLaneWeight]; 0: unset (the queue's default,
	// else 1).
	Weight int
}

// String is l in one phrase, "cap 5, rate 200/1s burst 20, weight 2" (the fields set), or
// "none".
func (l LaneLimits) String() string {
	var parts []string
	if l.Cap != 0 {
		parts = append(parts, "cap "+strconv.Itoa(l.Cap))
	}
	if !l.Rate.IsZero() {
		parts = append(parts, "rate "+l.Rate.String())
	}
	if l.Weight != 0 {
		parts = append(parts, "weight "+strconv.Itoa(l.Weight))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// QueueLimits are a queue's flow control: its own rate and the default limits of its lanes.
type QueueLimits struct {
	// Rate bounds every claim of the queue, of every lane and of the jobs without one. The
	// zero Rate is none.
	Rate Rate
	// Lanes are the limits of every lane that does not set its own, field by field. Its
	// Weight is also the weight of the queue's own stream of jobs without a lane, which no
	// other default limits.
	Lanes LaneLimits
}

// validate refuses a field that is negative or absurdly large, naming it.
func (r Rate) validate(where string) error {
	switch {
	case r.Limit < 0 || r.Limit > MaxRateLimit:
		return fmt.Errorf("%w: %s.Limit %d: a rate is 1 to %d claims per Per, or 0 for none", ErrInvalid, where, r.Limit, MaxRateLimit)
	case r.Per < 0 || r.Per > MaxRatePer || r.Per%time.Millisecond != 0:
		return fmt.Errorf("%w: %s.Per %v: whole milliseconds from 1 ms to 24 h, or 0 for 1 s", ErrInvalid, where, r.Per)
	case r.Burst < 0 || r.Burst > MaxRateBurst:
		return fmt.Errorf("%w: %s.Burst %d: 1 to %d, or 0 for 1", ErrInvalid, where, r.Burst, MaxRateBurst)
	case r.Limit == 0 && (r.Per != 0 || r.Burst != 0):
		return fmt.Errorf("%w: %s: Per and Burst need a Limit", ErrInvalid, where)
	}
	return nil
}

func (l LaneLimits) validate(where string) error {
	switch {
	case l.Cap < 0 || l.Cap > MaxLaneCap:
		return fmt.Errorf("%w: %s.Cap %d: a cap is 1 to %d claimed jobs, or 0 for unset", ErrInvalid, where, l.Cap, MaxLaneCap)
	case l.Weight < 0 || l.Weight > MaxLaneWeight:
		return fmt.Errorf("%w: %s.Weight %d: 1 to %d, or 0 for unset", ErrInvalid, where, l.Weight, MaxLaneWeight)
	}
	return l.Rate.validate(where + ".Rate")
}

// args are the limits as the scripts take them (laneset, flowset): "" for unset.
func (l LaneLimits) args() []string {
	opt := func(n int64) string {
		if n == 0 {
			return ""
		}
		return itoa(n)
	}
	return []string{opt(int64(l.Cap)), opt(int64(l.Rate.Limit)), opt(l.Rate.Per.Milliseconds()), opt(int64(l.Rate.Burst)), opt(int64(l.Weight))}
}

// parseLimits reads FORMAT lanelimits: "<cap>:<rate>:<per>:<burst>:<weight>:<paused>". A
// value the scripts never write (a field out of its range, a per or burst without a rate) is a
// protocol error, not limits.
func parseLimits(v string) (l LaneLimits, paused bool, err error) {
	if v == "" {
		return l, false, nil
	}
	bad := func() (LaneLimits, bool, error) { return LaneLimits{}, false, protocolError("lane limits", "%q", v) }
	f := strings.Split(v, ":")
	if len(f) != 6 || (f[5] != "" && f[5] != "1") {
		return bad()
	}
	var n [5]int64
	for i := range n {
		if f[i] == "" {
			continue
		}
		if n[i], err = strconv.ParseInt(f[i], 10, 64); err != nil || n[i] < 1 {
			return bad()
		}
	}
	if n[2] > MaxRatePer.Milliseconds() {
		return bad() // before it becomes a Duration, which it would overflow
	}
	l = LaneLimits{Cap: int(n[0]), Rate: Rate{Limit: int(n[1]), Per: time.Duration(n[2]) * time.Millisecond, Burst: int(n[3])}, Weight: int(n[4])}
	if l.validate("lane limits") != nil {
		return bad()
	}
	return l, f[5] == "1", nil
}

// merged is l with each unset field taken from d; Rate as a whole; Weight 1 when both are unset.
func (l LaneLimits) merged(d LaneLimits) LaneLimits {
	if l.Cap == 0 {
		l.Cap = d.Cap
	}
	if l.Rate.IsZero() {
		l.Rate = d.Rate
	}
	if l.Weight == 0 {
		l.Weight = d.Weight
	}
	if l.Weight == 0 {
		l.Weight = 1
	}
	if l.Rate.Limit > 0 {
		if l.Rate.Per == 0 {
			l.Rate.Per = DefaultRatePer
		}
		if l.Rate.Burst == 0 {
			l.Rate.Burst = DefaultRateBurst
		}
	}
	return l
}

// RateLimitedError, returned by a handler (see [RateLimited]), hands its job back because the
// service it calls refused it for now, and closes the job's lane for Delay.
type RateLimitedError struct {
	Delay time.Duration
}

// Error says for how long the lane is closed.
func (e *RateLimitedError) Error() string { return fmt.Sprintf("bus: rate limited for %v", e.Delay) }

// RateLimited returns the error a handler returns when the service its job calls refused it
// for now (a partner's 429 with its Retry-After): the worker hands the job back at once
// without spending an attempt (its attempts are not increased, and this claim does not count
// toward MaxAttempts: see FORMAT joblane, refunds), and no job of the job's lane is claimed
// for d, fleet-wide, on the server's clock. For a job without a lane, the queue's jobs without
// a lane are held instead. d is capped at [MaxRateLimited]; negative counts as 0, which hands
// the job back and closes nothing.
func RateLimited(d time.Duration) error {
	return &RateLimitedError{Delay: min(max(d, 0), MaxRateLimited)}
}

// laneArg validates a lane name, naming the rule.
func laneArg(op, queue, lane string) error {
	if err := keys.ValidateLane(lane); err != nil {
		return invalid(op+" in queue "+queue, err)
	}
	return nil
}
