package bus

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
)

// The scripts of periodic schedules. Their KEYS are built here: a schedule row carries a name
// after its type, which the queue-key table of the other scripts does not.
var (
	scPeriodicUpsert = lua.Get("periodic_upsert")
	scPeriodicFire   = lua.Get("periodic_fire")
	scPeriodicRemove = lua.Get("periodic_remove")
	scPeriodicPause  = lua.Get("periodic_pause")
)

// ErrNoSchedule: the queue has no periodic schedule of that name. Nothing was written.
var ErrNoSchedule = errors.New("bus: no such periodic schedule")

// MissedPolicy says what a scheduler pass fires when more than one tick of a schedule fell
// due since its last tick (no scheduler ran, or the pass came late). A pass that sees exactly
// one due tick fires it under every policy.
type MissedPolicy uint8

// The policies.
const (
	// MissedLatest, the default, fires once, for the newest due tick.
	MissedLatest MissedPolicy = iota
	// MissedCatchUp fires each due tick, the newest Periodic.CatchUp of them, oldest first:
	// the policy for "every tick matters".
	MissedCatchUp
	// MissedSkip fires none of the missed ticks: the pass moves the schedule's last tick to
	// the newest due one and waits for the next.
	MissedSkip
)

var missedByName = map[string]MissedPolicy{"latest": MissedLatest, "catch_up": MissedCatchUp, "skip": MissedSkip}

// String is the policy's name: latest, catch_up or skip.
func (m MissedPolicy) String() string {
	switch m {
	case MissedLatest:
		return "latest"
	case MissedCatchUp:
		return "catch_up"
	case MissedSkip:
		return "skip"
	}
	return "MissedPolicy(" + strconv.Itoa(int(m)) + ")"
}

// Periodic declares a periodic schedule of a queue: each tick enqueues one job, however many
// [Scheduler]s run. Declaring is an upsert, meant to run at every start of every process.
type Periodic struct {
	// Name names the schedule in its queue: 1 to 64 bytes of [A-Za-z0-9_.-].
	Name string
	// Cron is a cron spec: five fields (minute, hour, day of month, month, day of week), or six
	// with a leading seconds field, or a descriptor (@yearly, @monthly, @weekly, @daily,
	// @midnight, @hourly), read by github.com/robfig/cron/v3 in Zone. @every and CRON_TZ= / TZ=
	// are refused: use Every and Zone. Exactly one of Cron and Every is set.
	Cron string
	// Zone is the IANA time zone Cron is read in (time.LoadLocation). Default UTC; Cron only;
	// "Local" (each process's own zone, which schedulers need not share) is refused.
	Zone string
	// Every is a fixed period, whole milliseconds, at least [MinPeriodicEvery]: ticks fall at
	// its multiples since the Unix epoch (server clock), so every process agrees on them.
	Every time.Duration
	// Kind is the task kind a tick enqueues, with Args encoded by [JSONCodec] into the task
	// envelope ([EncodeTask]). Exactly one of Kind and Payload is set.
	Kind string
	// Args are the task's args (Kind only). [Bus.ListPeriodic] answers them as the
	// json.RawMessage that was encoded.
	Args any
	// Payload is the raw payload a tick enqueues, when it is not a task of Kind.
	Payload []byte
	// Missed is what a pass fires after missed ticks. Default [MissedLatest].
	Missed MissedPolicy
	// CatchUp bounds how many missed ticks [MissedCatchUp] fires: 0 to [MaxCatchUp], 0 meaning
	// [DefaultCatchUp]. MissedCatchUp only.
	CatchUp int
}

// PeriodicInfo is one schedule as [Bus.ListPeriodic] reads it.
type PeriodicInfo struct {
	// Periodic is the declaration (Args as json.RawMessage; CatchUp resolved).
	Periodic
	// Last is the newest tick fired or skipped, or the declaration when none was.
	Last time.Time
	// Next is the first tick after both Last and the server's time: the next one to fall due.
	// Ticks between Last and the server's time, if any, are due now and fire under Missed
	// when a scheduler runs. Zero when the spec matches no time within five years.
	Next time.Time
	// Paused is true while the schedule is paused ([Bus.PausePeriodic]).
	Paused bool
}

// encodePeriodic validates p and returns the row's spec and payload. Its errors wrap ErrInvalid
// and name the field.
func (b *Bus) encodePeriodic(op, queue string, p Periodic) (spec, payload []byte, err error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s %q in queue %s: %s", ErrInvalid, op, p.Name, queue, fmt.Sprintf(format, args...))
	}
	if err := keys.ValidateName(p.Name); err != nil {
		return nil, nil, fmt.Errorf("%w: %s in queue %s: Name: %w", ErrInvalid, op, queue, err)
	}
	s := periodicSpec{Cron: p.Cron, Zone: p.Zone, Missed: p.Missed.String(), CatchUp: p.CatchUp}
	switch {
	case p.Every < 0:
		return nil, nil, bad("Every: %v is negative", p.Every)
	case p.Every%time.Millisecond != 0:
		return nil, nil, bad("Every: %v is not a whole number of milliseconds", p.Every)
	case p.CatchUp < 0:
		return nil, nil, bad("CatchUp: %d is negative", p.CatchUp)
	case p.Zone == "Local" || p.Zone == "localtime" || p.Zone == "posixrules":
		// time.LoadLocation answers each process's own zone for "Local", and the zone
		// database's localtime and posixrules are links to the host's own on common systems
		// (Debian's localtime is /etc/localtime): schedulers on hosts of different zones would
		// not agree on the ticks. (A row stored with one before this check still fires, in
		// each scheduler's zone.)
		return nil, nil, bad("Zone: %q is the zone of each host, not one every scheduler shares; name an IANA zone", p.Zone)
	}
	s.EveryMs = p.Every.Milliseconds()
	t, err := s.compile()
	if err != nil {
		return nil, nil, bad("%v", err)
	}
	s.CatchUp = t.catchUp
	if t.cron != nil && t.next(time.Now().UnixMilli()) < 0 {
		return nil, nil, bad("Cron: %q matches no time within five years", p.Cron)
	}
	switch {
	case p.Kind == "" && p.Payload == nil:
		return nil, nil, bad("Kind, Payload: neither is set; a schedule enqueues exactly one")
	case p.Kind != "" && p.Payload != nil:
		return nil, nil, bad("Kind, Payload: both are set; a schedule enqueues exactly one")
	case p.Kind == "" && p.Args != nil:
		return nil, nil, bad("Args: set without Kind; a raw Payload has no args")
	case p.Kind != "":
		if payload, err = EncodeTask(p.Kind, p.Args, JSONCodec{}); err != nil {
			return nil, nil, fmt.Errorf("%w: %s %q in queue %s: Kind, Args: %w", ErrInvalid, op, p.Name, queue, err)
		}
		s.Kind = p.Kind
	default:
		payload = p.Payload
	}
	if len(payload) > b.cfg.MaxPayload {
		return nil, nil, fmt.Errorf("%w: %s %q in queue %s: the payload has %d bytes, the limit is %d", ErrTooLarge, op, p.Name, queue, len(payload), b.cfg.MaxPayload)
	}
	spec, err = json.Marshal(s)
	return spec, payload, err
}

// DeclarePeriodic declares the schedule p on queue, or updates its spec and payload: an upsert
// that any number of processes may run at once, at every start. A new schedule fires no tick
// at or before its declaration (server clock); an update keeps the paused state, and the last
// tick when only the payload changed: a changed spec starts afresh, as a new schedule does (no
// tick of it at or before the update fires; a tick of the old spec still due is passed over). Invalid input is refused before anything is written, with an error wrapping
// [ErrInvalid] that names the field.
func (b *Bus) DeclarePeriodic(ctx context.Context, queue string, p Periodic) error {
	const op = "declare periodic"
	q, err := b.queue(op, queue)
	if err != nil {
		return err
	}
	spec, payload, err := b.encodePeriodic(op, queue, p)
	if err != nil {
		return err
	}
	row, _ := q.Periodic(p.Name) // the name was validated
	args := []string{string(spec), string(payload), itoa(int64(b.cfg.MaxPayload))}
	_, err = b.exec(ctx, lua.Run{Script: scPeriodicUpsert, Keys: []string{q.Periodics(), row}, Args: args}, nil)
	return b.listAfter(ctx, q, periodicError(op, queue, p.Name, err))
}

// RemovePeriodic deletes the schedule name of queue and reports whether it existed. Jobs it
// already enqueued stay.
func (b *Bus) RemovePeriodic(ctx context.Context, queue, name string) (bool, error) {
	const op = "remove periodic"
	q, row, err := b.periodicRow(op, queue, name)
	if err != nil {
		return false, err
	}
	msg, err := b.exec(ctx, lua.Run{Script: scPeriodicRemove, Keys: []string{q.Periodics(), row}}, nil)
	if err != nil {
		return false, periodicError(op, queue, name, err)
	}
	n, err := msg.AsInt64()
	if err != nil {
		return false, protocolError(op, "reply %v", msg)
	}
	return n == 1, nil
}

// PrunePeriodic removes every schedule of queue whose name is not in keep, and returns the
// names it removed: a deployment that declares its schedules at start prunes the ones it
// dropped. When a removal fails, the names removed are returned with the first error.
func (b *Bus) PrunePeriodic(ctx context.Context, queue string, keep []string) ([]string, error) {
	const op = "prune periodic"
	q, err := b.queue(op, queue)
	if err != nil {
		return nil, err
	}
	for _, name := range keep {
		if err := keys.ValidateName(name); err != nil {
			return nil, fmt.Errorf("%w: %s in queue %s: keep: %w", ErrInvalid, op, queue, err)
		}
	}
	names, err := b.periodicNames(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("bus: %s in queue %s: %w", op, queue, err)
	}
	var gone []string
	var runs []lua.Run
	for _, name := range names {
		if row, err := q.Periodic(name); err == nil && !slices.Contains(keep, name) {
			gone = append(gone, name)
			runs = append(runs, lua.Run{Script: scPeriodicRemove, Keys: []string{q.Periodics(), row}})
		}
	}
	if len(runs) == 0 {
		return nil, nil
	}
	out, err := b.execMulti(ctx, runs, nil)
	if err != nil {
		return nil, fmt.Errorf("bus: %s in queue %s: %w", op, queue, err)
	}
	// Every removal was sent: each one answered without an error was applied, whatever an
	// earlier one answered.
	removed := gone[:0]
	var first error
	for i, r := range out {
		if r.err != nil {
			first = cmp.Or(first, periodicError(op, queue, gone[i], r.err))
			continue
		}
		removed = append(removed, gone[i])
	}
	return removed, first
}

// PausePeriodic pauses the schedule name of queue: it fires no tick until
// [Bus.ResumePeriodic]. Pausing a paused schedule is not an error; a missing one is
// [ErrNoSchedule].
func (b *Bus) PausePeriodic(ctx context.Context, queue, name string) error {
	return b.pausePeriodic(ctx, "pause periodic", queue, name, "1")
}

// ResumePeriodic resumes the schedule name of queue. The ticks that fell while it was paused
// never fire: resume moves its last tick to the server's time. Resuming a running schedule is
// not an error; a missing one is [ErrNoSchedule].
func (b *Bus) ResumePeriodic(ctx context.Context, queue, name string) error {
	return b.pausePeriodic(ctx, "resume periodic", queue, name, "0")
}

func (b *Bus) pausePeriodic(ctx context.Context, op, queue, name, arg string) error {
	_, row, err := b.periodicRow(op, queue, name)
	if err != nil {
		return err
	}
	_, err = b.exec(ctx, lua.Run{Script: scPeriodicPause, Keys: []string{row}, Args: []string{arg}}, nil)
	return periodicError(op, queue, name, err)
}

// ListPeriodic reads every schedule of queue, by name, with its last and next ticks.
func (b *Bus) ListPeriodic(ctx context.Context, queue string) ([]PeriodicInfo, error) {
	const op = "list periodic"
	q, err := b.queue(op, queue)
	if err != nil {
		return nil, err
	}
	names, err := b.periodicNames(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("bus: %s in queue %s: %w", op, queue, err)
	}
	rows, now, err := b.periodicRows(ctx, q, names, true)
	if err != nil {
		return nil, fmt.Errorf("bus: %s in queue %s: %w", op, queue, err)
	}
	out := make([]PeriodicInfo, 0, len(rows))
	for _, r := range rows {
		if r.err != nil {
			return nil, fmt.Errorf("%w: %s in queue %s: schedule %s: %v", ErrProtocol, op, queue, r.name, r.err)
		}
		info := PeriodicInfo{Periodic: r.declared(), Last: time.UnixMilli(r.last), Paused: r.paused}
		if next := r.ticks.next(max(r.last, now.UnixMilli())); next >= 0 {
			info.Next = time.UnixMilli(next)
		}
		out = append(out, info)
	}
	return out, nil
}

// periodicRow validates a queue and a schedule name and builds the schedule's row key.
func (b *Bus) periodicRow(op, queue, name string) (keys.Queue, string, error) {
	q, err := b.queue(op, queue)
	if err != nil {
		return keys.Queue{}, "", err
	}
	row, err := q.Periodic(name)
	if err != nil {
		return keys.Queue{}, "", invalid(op, err)
	}
	return q, row, nil
}

// periodicError is errorFor with the schedule's own not-found.
func periodicError(op, queue, name string, err error) error {
	var se *scriptError
	if errors.As(err, &se) && se.code == "EMQNOSCHED" {
		return fmt.Errorf("%w: %s %s in queue %s", ErrNoSchedule, op, name, queue)
	}
	return errorFor(call{op: op, queue: queue}, err)
}
