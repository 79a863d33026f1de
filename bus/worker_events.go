package bus

import (
	"fmt"
	"time"
)

// What a worker reports: the events of its jobs (WorkerConfig.OnEvent) and its counters
// (Worker.Stats).

// JobEventType says what happened to a job.
type JobEventType uint8

// The job events.
const (
	// JobClaimed: the worker claimed the job and starts its handler.
	JobClaimed JobEventType = iota + 1
	// JobExtended: a heartbeat renewed the job's lease.
	JobExtended
	// JobCompleted: the handler returned nil and the complete was accepted: the job is retired.
	JobCompleted
	// JobRetried: the handler failed and the job was scheduled again (JobEvent.At).
	JobRetried
	// JobDead: the job went to dead (attempts spent, [SkipRetry], no envelope).
	JobDead
	// JobSnoozed: the handler returned a [SnoozeError]; the job runs again at JobEvent.At.
	JobSnoozed
	// JobHandedBack: the job went back to pending without counting a failure: Close's
	// deadline cancelled its handler, or its claim fell short of WorkerConfig.ClaimAck and its
	// handler never started, or it waited in a stalled automatic prefetch buffer
	// (WorkerConfig.Prefetch).
	JobHandedBack
	// JobStale: a complete, fail or snooze answered EMQSTALE: the job was no longer this
	// worker's (JobEvent.Err is the *StaleError). An outcome sent again because its first
	// reply was lost (a timeout, a dropped connection) is refused this way when the first
	// send had landed: the job then completed, or was scheduled or sent to dead by the fail,
	// though the worker reports it stale (and emits no JobDead); Bus.Lookup tells which.
	JobStale
	// JobLeaseLost: a heartbeat's extend answered EMQSTALE: the handler's context was
	// cancelled (cause [ErrLeaseLost]) and its outcome will not be sent.
	JobLeaseLost
	// JobCancelled: a heartbeat found the job cancelled ([Bus.Cancel]): the handler's context
	// was cancelled (cause [ErrCancelled]), or, when the job still waited for a pool goroutine
	// (WorkerConfig.Prefetch), its handler will not run; when it returns (at once for one that
	// never ran), the job goes to dead (JobDead), or is retired if the handler returned nil.
	JobCancelled
	// JobRateLimited: the handler returned [RateLimited]: the job waits again, its claim
	// refunded, and its lane is closed until JobEvent.At.
	JobRateLimited
)

var eventNames = [...]string{"", "claimed", "extended", "completed", "retried", "dead", "snoozed", "handed back", "stale", "lease lost", "cancelled", "rate limited"}

// String is the event's name.
func (t JobEventType) String() string {
	if int(t) < len(eventNames) && t > 0 {
		return eventNames[t]
	}
	return fmt.Sprintf("JobEventType(%d)", uint8(t))
}

// JobEvent is one thing that happened to one job in a worker.
type JobEvent struct {
	Type JobEventType
	Job  Job
	// Kind is the task's kind; empty when the payload is not an envelope.
	Kind string
	// Err is the handler's error (retried, dead), or the *StaleError (stale, lease lost).
	Err error
	// Duration is how long the handler ran (completed, retried, dead, snoozed, handed back).
	Duration time.Duration
	// At is the run-at of a retried or snoozed job, or when a rate-limited job's lane opens
	// again (server clock).
	At time.Time
}

// WorkerStats are a worker's counters for its queue since Start.
type WorkerStats struct {
	Queue string
	// Running is how many handlers run now.
	Running int
	// Claimed counts jobs claimed (those handed back unstarted because their claim fell short
	// of WorkerConfig.ClaimAck too); Completed, jobs retired by a complete this worker sent.
	Claimed, Completed int64
	// Failed counts handler failures (errors, panics, timeouts, unknown kinds); each one is
	// then Retried or Dead.
	Failed, Retried, Dead int64
	// Snoozed counts snoozes; HandedBack, jobs handed back by Close after its deadline,
	// because their claim fell short of WorkerConfig.ClaimAck, or by a stalled automatic
	// prefetch buffer.
	Snoozed, HandedBack int64
	// Stale counts completes, fails and snoozes answered EMQSTALE; LeaseLost, jobs whose
	// heartbeat found the lease lost.
	Stale, LeaseLost int64
	// Cancelled counts jobs whose heartbeat found them cancelled ([Bus.Cancel]).
	Cancelled int64
	// RateLimited counts jobs handed back by a handler's [RateLimited].
	RateLimited int64
	// RoundTrips counts the pipelines the worker sent (claims, outcomes, heartbeats and
	// housekeeping ride in them); RoundTripTime is the time they spent in flight, added up.
	// RoundTripTime over a span of wall time is the mean number of round trips in flight
	// (at most 2: the loop sends the next while the previous is answered).
	RoundTrips    int64
	RoundTripTime time.Duration
	// Prefetch is the size of the prefetch buffer: WorkerConfig.Prefetch when it is fixed
	// (0 when negative), else the automatic size the worker last gave it.
	Prefetch int
}
