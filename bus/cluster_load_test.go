package bus_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// The cluster load tests run producers and workers on a dedicated cluster while its
// topology changes (failovers, slot migrations), and keep a ledger of every job: whether its
// enqueue was acknowledged, every run of its handler, every accepted complete (with its
// token) and every other outcome its workers saw. From it they count acknowledged,
// completed, completed twice and lost, and explain every job that ran more than once.

// ledger is what producers and workers saw, per job id.
type ledger struct {
	mu        sync.Mutex
	acked     map[keys.JobID]bool
	unacked   int                     // jobs of enqueues that returned an error
	runs      map[keys.JobID]int      // handler returns (nil)
	completes map[keys.JobID][]int64  // tokens of accepted completes
	history   map[keys.JobID][]string // "ran@token", "<event>@token[: reason]"
	errs      []string                // the first enqueue errors
}

func newLedger() *ledger {
	return &ledger{acked: map[keys.JobID]bool{}, runs: map[keys.JobID]int{},
		completes: map[keys.JobID][]int64{}, history: map[keys.JobID][]string{}}
}

func (l *ledger) ran(id keys.JobID, token int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs[id]++
	l.history[id] = append(l.history[id], fmt.Sprintf("ran@%d", token))
}

// event takes a worker's event; claimed and extended say nothing the ledger needs.
func (l *ledger) event(typ bus.JobEventType, id keys.JobID, token int64, reason string) {
	if typ == bus.JobClaimed || typ == bus.JobExtended {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if typ == bus.JobCompleted {
		l.completes[id] = append(l.completes[id], token)
	}
	h := fmt.Sprintf("%s@%d", typ, token)
	if reason != "" {
		h += ": " + reason
	}
	l.history[id] = append(l.history[id], h)
}

func (l *ledger) onEvent(e bus.JobEvent) {
	reason := ""
	if se, ok := e.Err.(*bus.StaleError); ok {
		reason = string(se.Reason)
	}
	l.event(e.Type, e.Job.ID, e.Job.Token, reason)
}

// tally is the ledger's counts.
type tally struct {
	acked, unacked int
	completed      int      // jobs with an accepted complete, or that ran and whose complete's reply was lost (a resend found no row)
	twice          []string // jobs with two accepted completes: id and tokens
	ranAgain       []string // jobs whose handler ran more than once, each with its history
	unexplained    []string // of ranAgain, those whose history explains nothing (see rerunCause)
	sameToken      []string // jobs with two accepted completes under one token: the fence failed
	lost           []string // acknowledged jobs that never ran
	ran            int
}

// rerunCause explains why a job ran again, from its history: a lease expiry (its holder's
// heartbeat or outcome was refused, or a claim was handed back), or, when rollbacks are
// expected (a forced failover to a replica that lagged), a complete accepted by a primary
// that died before replicating it, so the promoted replica reaped the job and it ran again
// under a newer token. It answers "" when the history shows neither.
func rerunCause(h []string, rollbacks bool) string {
	for _, s := range h {
		switch {
		case strings.HasPrefix(s, "lease lost@"):
			return "lease lost: reaped and claimed again"
		case strings.HasPrefix(s, "stale@"):
			return "an outcome refused (" + s + "): its lease had expired and the job was claimed again"
		case strings.HasPrefix(s, "handed back@"):
			return "claim handed back"
		}
	}
	if rollbacks {
		for i, s := range h {
			if strings.HasPrefix(s, "completed@") && slices.ContainsFunc(h[i+1:], func(s string) bool { return strings.HasPrefix(s, "ran@") }) {
				return "complete lost with a primary that died unreplicated: reaped on the promoted replica and run again"
			}
		}
	}
	return ""
}

func hasDup(ts []int64) bool {
	seen := map[int64]bool{}
	for _, t := range ts {
		if seen[t] {
			return true
		}
		seen[t] = true
	}
	return false
}

func (l *ledger) tally(rollbacks bool) tally {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := tally{acked: len(l.acked), unacked: l.unacked}
	for id, h := range l.history {
		accepted := len(l.completes[id]) > 0
		if !accepted && l.runs[id] > 0 && slices.ContainsFunc(h, func(s string) bool { return strings.HasPrefix(s, "stale@") && strings.HasSuffix(s, string(bus.NoRow)) }) {
			accepted = true
		}
		if accepted {
			t.completed++
		}
		if len(l.completes[id]) > 1 {
			t.twice = append(t.twice, fmt.Sprintf("%s tokens %v: %s", id, l.completes[id], strings.Join(h, ", ")))
		}
		if l.runs[id] > 0 {
			t.ran++
		}
		if l.runs[id] > 1 {
			c := rerunCause(h, rollbacks)
			line := fmt.Sprintf("%s: %s (%s)", id, strings.Join(h, ", "), c)
			t.ranAgain = append(t.ranAgain, line)
			if c == "" {
				t.unexplained = append(t.unexplained, line)
			}
		}
		if ts := l.completes[id]; hasDup(ts) {
			t.sameToken = append(t.sameToken, fmt.Sprintf("%s tokens %v", id, ts))
		}
	}
	for id := range l.acked {
		if l.runs[id] == 0 {
			t.lost = append(t.lost, id.String())
		}
	}
	slices.Sort(t.twice)
	slices.Sort(t.ranAgain)
	return t
}

// produce enqueues batches of 10 "work" jobs to queue with ack until stop is set or max jobs
// were sent, and records each batch in the ledger; it returns how many jobs it sent.
func produce(ctx context.Context, b *bus.Bus, queue string, ack bus.Ack, max int, pace time.Duration, stop *atomic.Bool, led *ledger) int {
	sent := 0
	for sent < max && !stop.Load() {
		jobs := make([]bus.NewJob, min(10, max-sent))
		for i := range jobs {
			p, err := bus.EncodeTask("work", args{N: sent + i}, nil)
			if err != nil {
				panic(err)
			}
			jobs[i].Payload = p
		}
		out, err := b.EnqueueBatch(ctx, queue, jobs, &bus.EnqueueOpts{Ack: ack})
		led.mu.Lock()
		if err == nil {
			for _, e := range out {
				led.acked[e.ID] = true
			}
		} else {
			led.unacked += len(jobs)
			if len(led.errs) < 5 {
				led.errs = append(led.errs, err.Error())
			}
		}
		led.mu.Unlock()
		sent += len(jobs)
		time.Sleep(pace)
	}
	return sent
}

// queuesDrained waits until the queues hold nothing pending, active, scheduled or dead.
func queuesDrained(t *testing.T, b *bus.Bus, queues []string, within time.Duration) {
	t.Helper()
	valkeytest.Eventually(t, within, "the queues to drain", func() bool {
		for _, q := range queues {
			cs, err := b.Counts(context.Background(), q)
			if err != nil || cs != (bus.Counts{}) {
				return false
			}
		}
		return true
	})
}

// report logs a tally under a scenario's name and checks its bounds: nothing lost when
// lossless, never two accepted completes under one token, every second run explained
// (rollbacks: a forced failover may roll back completes, see rerunCause).
func report(t *testing.T, scenario string, led *ledger, lossless, rollbacks bool) tally {
	t.Helper()
	tl := led.tally(rollbacks)
	t.Logf("%s: acknowledged %d (enqueues that erred: %d jobs), ran %d, completed %d, completed twice %d, ran again %d, lost %d",
		scenario, tl.acked, tl.unacked, tl.ran, tl.completed, len(tl.twice), len(tl.ranAgain), len(tl.lost))
	for _, e := range led.errs {
		t.Logf("%s: an enqueue error: %s", scenario, e)
	}
	for _, s := range tl.ranAgain {
		t.Logf("%s: ran again: %s", scenario, s)
	}
	for _, s := range tl.twice {
		t.Logf("%s: completed twice: %s", scenario, s)
	}
	if lossless {
		require.Empty(t, tl.lost, "%s: acknowledged jobs lost", scenario)
	}
	require.Empty(t, tl.unexplained, "%s: jobs that ran again with nothing to explain it", scenario)
	require.Empty(t, tl.sameToken, "%s: two accepted completes under one token", scenario)
	return tl
}

// inProcessWorkers starts n sets of workers, one worker per queue in each set, each set on
// a cluster client and Bus of its own (as n processes would be), recording into led.
func inProcessWorkers(t *testing.T, cl *valkeytest.Cluster, queues []string, n int, cfg bus.WorkerConfig, led *ledger) []*bus.Worker {
	t.Helper()
	var ws []*bus.Worker
	for range n {
		b := newBus(t, cl.Client(t), bus.Config{})
		for _, q := range queues {
			c := cfg
			c.Queue, c.OnEvent = q, led.onEvent
			w, err := bus.NewWorker(b, c)
			require.NoError(t, err)
			bus.MustHandle(w, "work", func(ctx context.Context, task *bus.Task[args]) error {
				time.Sleep(time.Millisecond)
				led.ran(task.Job.ID, task.Job.Token)
				return nil
			}, nil)
			require.NoError(t, w.Start())
			ws = append(ws, w)
		}
	}
	t.Cleanup(func() {
		for _, w := range ws {
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = w.Close(cctx)
			cancel()
		}
	})
	return ws
}

// threeQueues returns three queue names made from base, one on each primary of cl.
func threeQueues(t *testing.T, cl *valkeytest.Cluster, base string) []string {
	t.Helper()
	prims := cl.Primaries()
	require.Len(t, prims, 3)
	qs := make([]string, 3)
	for i, p := range prims {
		qs[i] = queueOn(t, cl, fmt.Sprintf("%s.q%d", base, i), p)
	}
	return qs
}

func soak() bool { return os.Getenv("EMQ_SOAK") == "1" }
