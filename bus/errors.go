package bus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/internal/panics"
	"github.com/echocache/echocache/keys"
)

// Sentinel errors. Compare with errors.Is; the typed errors below match them too.
var (
	// ErrStale: a verb on a claimed job was refused because the caller no longer holds the
	// job's lease (its row is gone, it is not active, or another claim minted a newer token).
	// Nothing was written. The error is a *[StaleError] with the reason.
	ErrStale = errors.New("bus: stale")
	// ErrPaused: the queue is paused; claims hand out nothing until it is resumed.
	ErrPaused = errors.New("bus: queue paused")
	// ErrNotFound: the job has no row in the queue.
	ErrNotFound = errors.New("bus: no such job")
	// ErrState: an operator verb met a job in a state it does not apply to (cancel of a dead
	// job, retry of a job that is not dead). The error is a *[StateError].
	ErrState = errors.New("bus: job in the wrong state")
	// ErrCancelled: the job was cancelled by [Bus.Cancel] while it was claimed. It is the
	// cause (context.Cause) of a worker's handler context cancelled for that reason, at the
	// heartbeat after the cancel; the job then goes to dead, its failure history saying
	// "cancelled", and is not retried. A *[StaleError] whose Reason is [Cancelled] matches it
	// too (an extend of a cancelled job).
	ErrCancelled = errors.New("bus: job cancelled")
	// ErrInvalid: a name, id, key or argument is not valid. Nothing was written. Errors about
	// names and ids also match keys.ErrInvalid.
	ErrInvalid = errors.New("bus: invalid")
	// ErrBusy: [Bus.DropQueue] found jobs claimed (running somewhere) and was not forced.
	// Nothing was written.
	ErrBusy = errors.New("bus: queue has claimed jobs")
	// ErrTooLarge: a payload is larger than [Config.MaxPayload]. Nothing was written.
	ErrTooLarge = errors.New("bus: payload too large")
	// ErrWrongType: a key of the queue holds a value of another type than the grammar says
	// (someone wrote it by hand). Nothing was written.
	ErrWrongType = errors.New("bus: key holds the wrong type")
	// ErrExists: an enqueue named a job id whose row already exists. Nothing was written.
	ErrExists = errors.New("bus: job id exists")
	// ErrNotDurable: the write was applied on the primary but not acknowledged at the
	// durability the call asked for. The error is an *[AckError]; the write may still exist.
	ErrNotDurable = errors.New("bus: write not acknowledged at the requested durability")
	// ErrProtocol: the server answered with a reply the bus does not understand; a script of
	// another version is probably loaded under the same SHA1's name.
	ErrProtocol = errors.New("bus: unexpected reply")
)

// StaleReason says why a verb on a claimed job was refused.
type StaleReason string

// The reasons, spelled as the scripts spell them after "EMQSTALE ".
const (
	NoRow         StaleReason = "no row"         // the row is gone: the job was completed, cancelled or purged
	NotActive     StaleReason = "not active"     // the job is no longer claimed: reaped, failed, snoozed or dead
	TokenMismatch StaleReason = "token mismatch" // another claim minted a newer token: the lease was lost
	// Cancelled: an extend found the caller's job cancelled while claimed ([Bus.Cancel]): the
	// lease was not renewed; the holder should stop and fail the job (it goes to dead).
	Cancelled StaleReason = "cancelled"
)

// StaleError is the Go face of the scripts' EMQSTALE reply: the caller's token no longer
// fences the job. Nothing was written.
type StaleError struct {
	Op     string // the verb: complete, fail, extend, snooze
	Queue  string
	ID     keys.JobID
	Token  int64
	Reason StaleReason
}

// Error names the verb, the job, the token and the reason.
func (e *StaleError) Error() string {
	return fmt.Sprintf("bus: stale: %s %s (token %d) in queue %s: %s", e.Op, e.ID, e.Token, e.Queue, e.Reason)
}

// Is makes errors.Is(err, ErrStale) true, and errors.Is(err, ErrCancelled) when the reason is
// [Cancelled].
func (e *StaleError) Is(target error) bool {
	return target == ErrStale || target == ErrCancelled && e.Reason == Cancelled
}

// StateError says an operator verb met a job in a state it does not apply to.
type StateError struct {
	Op    string
	Queue string
	ID    keys.JobID
	State State // the state the job is in
}

// Error names the verb, the job and its state.
func (e *StateError) Error() string {
	return fmt.Sprintf("bus: %s %s in queue %s: the job is %s", e.Op, e.ID, e.Queue, e.State)
}

// Is makes errors.Is(err, ErrState) true.
func (e *StateError) Is(target error) bool { return target == ErrState }

// AckError says a write was applied on the primary but fewer acknowledgements than asked
// came back within the timeout. The write may still exist (and may even reach the replicas
// later), and it may be lost if the primary fails before it does: callers that retry must be
// ready to find it done.
type AckError struct {
	Durability Durability
	Wanted     int           // replicas asked for
	Acked      int           // replicas that acknowledged
	LocalAOF   bool          // Persisted: whether the primary fsynced its AOF
	Timeout    time.Duration // how long the server waited
	Err        error         // set when the server refused the wait itself (WAITAOF without AOF), or the caller's context ended during it
}

// Error says what was asked, what came back, and that the write may still exist.
func (e *AckError) Error() string {
	if errors.Is(e.Err, context.Canceled) || errors.Is(e.Err, context.DeadlineExceeded) {
		return fmt.Sprintf("bus: %s write applied on the primary; the caller's context ended while it waited for its acknowledgements (the write may still exist): %v", e.Durability, e.Err)
	}
	if e.Err != nil {
		return fmt.Sprintf("bus: %s write applied on the primary, but the wait was refused (the write may still exist): %v", e.Durability, e.Err)
	}
	if e.Durability == Persisted && !e.LocalAOF {
		return fmt.Sprintf("bus: persisted write applied on the primary but not fsynced there within %v (the write may still exist)", e.Timeout)
	}
	return fmt.Sprintf("bus: %s write applied on the primary but acknowledged by %d of %d replicas within %v (the write may still exist, and may be lost on failover)",
		e.Durability, e.Acked, e.Wanted, e.Timeout)
}

// Is makes errors.Is(err, ErrNotDurable) true.
func (e *AckError) Is(target error) bool { return target == ErrNotDurable }

// Unwrap is the server's refusal of the wait, if that is what happened.
func (e *AckError) Unwrap() error { return e.Err }

// PanicError is a handler's panic turned into its job's error: Where is "bus: handler of
// kind <kind>", Value what was passed to panic, Stack the panicking goroutine's stack, and
// Error reads "bus: handler of kind <kind> panicked: <value>" followed by the stack. The job
// fails as if the handler had returned it (retried with backoff, dead once its attempts are
// spent); find it with errors.As in [JobEvent].Err. Unwrap returns the panic value when it is
// an error. The cache reports a loader's panic with the same type.
type PanicError = panics.Error

// scriptError is a script's error reply, split into its code (EMQSTALE, ...) and the rest.
type scriptError struct {
	code, rest string
}

func (e *scriptError) Error() string { return e.code + " " + e.rest }

// translate is the one place where valkey-go errors are read. Script error replies become
// the package's errors; anything else (network, timeouts, cluster errors) passes through.
// Callers fill in the context a typed error needs (see [errorFor]).
func translate(err error) error {
	if err == nil {
		return nil
	}
	ve, ok := valkey.IsValkeyErr(err)
	if !ok {
		return err
	}
	code, rest, _ := strings.Cut(ve.Error(), " ")
	switch code {
	case "EMQSTALE", "EMQNOJOB", "EMQSTATE", "EMQPAUSED", "EMQARGS", "EMQKEYS", "EMQTOOBIG", "EMQTYPE", "EMQEXISTS", "EMQNOSCHED", "EMQLANES", "EMQBUSY":
		return &scriptError{code: code, rest: rest}
	case "WRONGTYPE":
		return fmt.Errorf("%w: %s", ErrWrongType, ve.Error())
	}
	return err
}

// isNil reports whether err is a nil reply.
func isNil(err error) bool {
	return valkey.IsValkeyNil(err) // IsValkeyErr answers false for a nil reply
}

// call names the verb, queue, job and token an error is about.
type call struct {
	op    string
	queue string
	id    keys.JobID
	token int64
}

// errorFor turns a translated error into the package's error for c.
func errorFor(c call, err error) error {
	if err == nil {
		return nil
	}
	var se *scriptError
	if !errors.As(err, &se) {
		if errors.Is(err, ErrNotDurable) || errors.Is(err, ErrWrongType) || errors.Is(err, ErrProtocol) {
			return err
		}
		return fmt.Errorf("bus: %s in queue %s: %w", c.op, c.queue, err)
	}
	switch se.code {
	case "EMQSTALE":
		return &StaleError{Op: c.op, Queue: c.queue, ID: c.id, Token: c.token, Reason: StaleReason(se.rest)}
	case "EMQSTATE":
		state, id, _ := strings.Cut(se.rest, " ")
		e := &StateError{Op: c.op, Queue: c.queue, ID: c.id, State: State(state)}
		if parsed, err := keys.ParseJobID(id); err == nil {
			e.ID = parsed
		}
		return e
	case "EMQNOJOB":
		return fmt.Errorf("%w: %s %s in queue %s", ErrNotFound, c.op, se.rest, c.queue)
	case "EMQPAUSED":
		return fmt.Errorf("%w: %s in queue %s", ErrPaused, c.op, c.queue)
	case "EMQTOOBIG":
		return fmt.Errorf("%w: %s in queue %s: %s", ErrTooLarge, c.op, c.queue, se.rest)
	case "EMQTYPE":
		return fmt.Errorf("%w: %s in queue %s: %s", ErrWrongType, c.op, c.queue, se.rest)
	case "EMQEXISTS":
		return fmt.Errorf("%w: %s in queue %s: %s", ErrExists, c.op, c.queue, se.rest)
	case "EMQLANES":
		return fmt.Errorf("%w: %s in queue %s", errFlowControl, c.op, c.queue)
	case "EMQBUSY":
		return fmt.Errorf("%w: %s in queue %s: %s", ErrBusy, c.op, c.queue, se.rest)
	}
	return fmt.Errorf("%w: %s in queue %s: %s %s", ErrInvalid, c.op, c.queue, se.code, se.rest)
}

// invalid wraps a keys error (or a message) as ErrInvalid, keeping keys.ErrInvalid reachable.
func invalid(op string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrInvalid, op, err)
}

func protocolError(op string, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrProtocol, op, fmt.Sprintf(format, args...))
}
