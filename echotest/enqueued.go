package echotest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/keys"
)

// maxListed bounds how many jobs of each set [Enqueued] reads.
const maxListed = 10_000

// EnqueuedJob is a job waiting in a queue, as [Enqueued] reads it.
type EnqueuedJob struct {
	ID keys.JobID
	// State is bus.StatePending or bus.StateScheduled; At is a scheduled job's run-at
	// (server clock).
	State bus.State
	At    time.Time
	// Attempts counts the job's claims so far (0 for a job never claimed).
	Attempts int64
	// Lane and Priority are the job's, as enqueued ("" and 0 for none).
	Lane     string
	Priority int
	// Kind and Args are the task's kind and encoded args; for a payload that is not a task
	// envelope, Kind is "" and Args the whole payload.
	Kind string
	Args []byte
}

func (j EnqueuedJob) String() string {
	s := fmt.Sprintf("%s %s %s(%s)", j.ID, j.State, j.Kind, j.Args)
	if j.State == bus.StateScheduled {
		s += " at " + j.At.UTC().Format(time.RFC3339Nano)
	}
	if j.Lane != "" {
		s += " lane " + j.Lane
	}
	if j.Priority != 0 {
		s += fmt.Sprintf(" priority %d", j.Priority)
	}
	return s
}

// Enqueued lists the jobs waiting in queue: its jobs of priority 1 to 3 (keys.Urgent, most
// urgent first), its pending jobs in mint order, each lane's waiting jobs (keys.LanePending,
// lanes by name, each in mint order), then its scheduled jobs by run-at, at most 10,000 of
// each set. It reads the sets and then each job's row (bus.Lookup), so jobs claimed or moved
// meanwhile are left out. A failed read fails the test.
func Enqueued(tb testing.TB, b *bus.Bus, queue string) []EnqueuedJob {
	tb.Helper()
	q, err := keys.NewQueue(queue)
	if err != nil {
		tb.Fatalf("echotest: Enqueued: %v", err)
	}
	ctx := context.Background()
	c := b.Client()
	// The lanes that hold jobs: every job of a lane has its field in joblane (FORMAT joblane,
	// "<priority>:<refunds>:<lane>"), so the lanes named there are all the lanes with jobs.
	fields, err := c.Do(ctx, c.B().Hvals().Key(q.JobLane()).Build()).AsStrSlice()
	if err != nil {
		tb.Fatalf("echotest: Enqueued: reading %s: %v", q.JobLane(), err)
	}
	var lanes []string
	for _, f := range fields {
		if parts := strings.SplitN(f, ":", 3); len(parts) == 3 && parts[2] != "" && !slices.Contains(lanes, parts[2]) {
			lanes = append(lanes, parts[2])
		}
	}
	slices.Sort(lanes)
	sets := []string{q.Urgent(), q.Pending()}
	for _, l := range lanes {
		key, err := q.LanePending(l)
		if err != nil {
			tb.Fatalf("echotest: Enqueued: %s names lane %q: %v", q.JobLane(), l, err)
		}
		sets = append(sets, key)
	}
	sets = append(sets, q.Schedule())
	var ids []string
	for _, set := range sets {
		got, err := c.Do(ctx, c.B().Zrange().Key(set).Min("0").Max(fmt.Sprint(maxListed-1)).Build()).AsStrSlice()
		if err != nil {
			tb.Fatalf("echotest: Enqueued: reading %s: %v", set, err)
		}
		ids = append(ids, got...)
	}
	var out []EnqueuedJob
	seen := make(map[string]bool, len(ids))
	for _, s := range ids {
		if seen[s] {
			continue // moved from one set to another between the reads
		}
		seen[s] = true
		id, err := keys.ParseJobID(s)
		if err != nil {
			tb.Fatalf("echotest: Enqueued: queue %s holds %q, not a JOB id", queue, s)
		}
		info, err := b.Lookup(ctx, queue, id)
		switch {
		case err == nil:
		case isNotFound(err):
			continue
		default:
			tb.Fatalf("echotest: Enqueued: %v", err)
		}
		if info.State != bus.StatePending && info.State != bus.StateScheduled {
			continue // claimed since the sets were read
		}
		j := EnqueuedJob{ID: id, State: info.State, At: info.At, Attempts: info.Attempts,
			Lane: info.Lane, Priority: info.Priority, Args: info.Payload}
		if kind, body, err := bus.ParseEnvelope(info.Payload); err == nil {
			j.Kind, j.Args = kind, body
		}
		out = append(out, j)
	}
	return out
}

func isNotFound(err error) bool { return errors.Is(err, bus.ErrNotFound) }

// RequireOpts are the options of [RequireEnqueued]; nil means defaults.
type RequireOpts struct {
	// Codec decodes the args of the jobs of kind, to compare them with the expected args.
	// Default bus.JSONCodec.
	Codec bus.Codec
	// State, when set, requires the job to be in that state: bus.StatePending or
	// bus.StateScheduled. Default either.
	State bus.State
	// Lane, when set, requires the job to be in that lane (EnqueueOpts.Lane). Default any
	// lane, or none.
	Lane string
}

// RequireEnqueued fails the test unless queue holds a waiting job (pending or scheduled, as
// [Enqueued] lists them) of kind whose args, decoded by the codec into a value of type T,
// equal args (reflect.DeepEqual). It returns the first such job. The failure lists what the
// queue holds.
//
//	echotest.RequireEnqueued(t, b, "mail", "email.send", Email{To: "ada@example.com"}, nil)
func RequireEnqueued[T any](tb testing.TB, b *bus.Bus, queue, kind string, args T, opts *RequireOpts) EnqueuedJob {
	tb.Helper()
	var o RequireOpts
	if opts != nil {
		o = *opts
	}
	if o.Codec == nil {
		o.Codec = bus.JSONCodec{}
	}
	if o.State != "" && o.State != bus.StatePending && o.State != bus.StateScheduled {
		tb.Fatalf("echotest: RequireEnqueued: State %q is neither pending nor scheduled", o.State)
	}
	all := Enqueued(tb, b, queue)
	for _, j := range all {
		if j.Kind != kind || o.State != "" && j.State != o.State || o.Lane != "" && j.Lane != o.Lane {
			continue
		}
		var got T
		if err := o.Codec.Unmarshal(j.Args, &got); err != nil {
			continue
		}
		if reflect.DeepEqual(got, args) {
			return j
		}
	}
	want := "waiting"
	if o.State != "" {
		want = string(o.State)
	}
	if o.Lane != "" {
		want += " (lane " + o.Lane + ")"
	}
	tb.Fatalf("echotest: queue %s holds no %s job of kind %s with args %+v; it holds %d waiting:%s", queue, want, kind, args, len(all), listing(all))
	return EnqueuedJob{}
}

// RequireNotEnqueued fails the test if queue holds a waiting job (pending or scheduled) of
// kind.
func RequireNotEnqueued(tb testing.TB, b *bus.Bus, queue, kind string) {
	tb.Helper()
	all := Enqueued(tb, b, queue)
	var found []EnqueuedJob
	for _, j := range all {
		if j.Kind == kind {
			found = append(found, j)
		}
	}
	if len(found) > 0 {
		tb.Fatalf("echotest: queue %s holds %d waiting jobs of kind %s:%s", queue, len(found), kind, listing(found))
	}
}

func listing(jobs []EnqueuedJob) string {
	var b strings.Builder
	for i, j := range jobs {
		if i == 20 {
			fmt.Fprintf(&b, "\n\t... and %d more", len(jobs)-i)
			break
		}
		b.WriteString("\n\t" + j.String())
	}
	return b.String()
}
