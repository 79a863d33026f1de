package bus

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/valkey-io/valkey-go"
)

// Durability says when a write call returns.
type Durability uint8

// The durability levels.
const (
	// Primary, the default, returns when the primary has applied the write: at-least-once
	// while the primary lives.
	Primary Durability = iota
	// Replicated follows the write with WAIT on the same connection and node, and returns
	// when Ack.Replicas replicas acknowledged it or Ack.Timeout passed.
	Replicated
	// Persisted follows the write with WAITAOF on the same connection and node, and returns
	// when the primary fsynced its AOF and Ack.Replicas replicas did, or Ack.Timeout passed.
	Persisted
)

// String is the level's name: primary, replicated or persisted.
func (d Durability) String() string {
	switch d {
	case Primary:
		return "primary"
	case Replicated:
		return "replicated"
	case Persisted:
		return "persisted"
	}
	return "Durability(" + strconv.Itoa(int(d)) + ")"
}

// Ack is the durability a write call asks for. The zero Ack is [Primary].
//
// When fewer acknowledgements come back than asked, the call returns an *[AckError]
// (errors.Is(err, [ErrNotDurable])) together with its normal result: the write was applied on
// the primary and may still exist, so a caller that retries must be ready to find it done.
type Ack struct {
	Durability Durability
	// Replicas is how many replicas must acknowledge. Default 1 for Replicated; default 0 for
	// Persisted (the primary's own fsync).
	Replicas int
	// Timeout is how long the server waits for the acknowledgements. Default 1 s
	// ([DefaultAckTimeout]).
	Timeout time.Duration
}

func (a *Ack) validate() error {
	switch {
	case a.Durability > Persisted:
		return fmt.Errorf("%w: ack: unknown Durability %v", ErrInvalid, a.Durability)
	case a.Replicas < 0:
		return fmt.Errorf("%w: ack: Replicas %d must not be negative", ErrInvalid, a.Replicas)
	case a.Timeout < 0:
		return fmt.Errorf("%w: ack: Timeout %v must not be negative", ErrInvalid, a.Timeout)
	}
	return nil
}

func (a *Ack) replicas() int {
	if a.Replicas == 0 && a.Durability == Replicated {
		return 1
	}
	return a.Replicas
}

// timeout is the wait the server is asked for: whole milliseconds, rounded up.
func (a *Ack) timeout() time.Duration {
	if a.Timeout == 0 {
		return DefaultAckTimeout
	}
	// Near the largest Duration the rounding up would overflow: take the whole milliseconds
	// below it instead.
	return time.Duration(min(msCeil(a.Timeout), math.MaxInt64/int64(time.Millisecond))) * time.Millisecond
}

// waitSlack is how much later than its timeout a wait's reply may come: the server ends a
// blocked WAIT at a cron tick (every 100 ms at the default hz), then the reply travels.
const waitSlack = 250 * time.Millisecond

// fits reports whether a's wait ends, reply included, before ctx can: ctx never ends, or its
// deadline leaves the whole timeout and waitSlack. Then the wait may share the scripts' round
// trip.
func (a *Ack) fits(ctx context.Context) bool {
	if ctx.Done() == nil {
		return true
	}
	deadline, ok := ctx.Deadline()
	return ok && a.timeout()+waitSlack <= time.Until(deadline)
}

// within returns a, or a copy of it whose server wait ends before ctx's deadline with time
// to spare for the reply (half of what is left, at most waitSlack). valkey-go fails a whole
// pipeline at the context's deadline, the replies of the scripts before the wait included, so
// a wait that outlived ctx would turn writes that were applied into a bare context error.
func (a *Ack) within(ctx context.Context) *Ack {
	deadline, ok := ctx.Deadline()
	if !ok {
		return a
	}
	left := time.Until(deadline)
	wait := left - min(left/2, waitSlack)
	if a.timeout() <= wait {
		return a
	}
	c := *a
	c.Timeout = max(wait, time.Millisecond)
	return &c
}

func (a *Ack) command(bld valkey.Builder) valkey.Completed {
	timeoutMs := a.timeout().Milliseconds() // whole already, and at least 1: 0 would block forever
	if a.Durability == Persisted {
		return bld.Waitaof().Numlocal(1).Numreplicas(int64(a.replicas())).Timeout(timeoutMs).Build()
	}
	return bld.Wait().Numreplicas(int64(a.replicas())).Timeout(timeoutMs).Build()
}

// check reads the wait's reply.
func (a *Ack) check(r valkey.ValkeyResult) error {
	e := &AckError{Durability: a.Durability, Wanted: a.replicas(), Timeout: a.timeout()}
	msg, err := r.ToMessage()
	if err != nil {
		if _, ok := valkey.IsValkeyErr(err); ok || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			e.Err = err // the wait was refused, or the caller's context ended during it
			return e
		}
		return fmt.Errorf("bus: %s write: waiting for acknowledgements (the write may still exist): %w", a.Durability, err)
	}
	if a.Durability == Persisted {
		arr, err := msg.ToArray()
		if err != nil || len(arr) != 2 {
			return protocolError("waitaof", "reply %v", msg)
		}
		local, _ := arr[0].AsInt64()
		n, _ := arr[1].AsInt64()
		e.LocalAOF, e.Acked = local >= 1, int(n)
		if e.LocalAOF && e.Acked >= e.Wanted {
			return nil
		}
		return e
	}
	n, err := msg.AsInt64()
	if err != nil {
		return protocolError("wait", "reply %v", msg)
	}
	e.Acked = int(n)
	if e.Acked >= e.Wanted {
		return nil
	}
	return e
}
