package dash

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/lua"
)

// The sampler: every Config.SampleEvery it lists the queues (one ZRANGE of the registry) and
// reads every queue's published worker stats in one pipelined round trip, and keeps, per
// queue, a ring of the fleet's rates between consecutive reads ([bus.FleetStats.Rates]). The
// pages draw throughput from the rings and never read the counters themselves. Memory is
// bounded: at most MaxQueues rings of Samples samples; a queue that leaves the registry
// loses its ring.

// sample is one point of a queue's throughput.
type sample struct {
	At                   time.Time // the server's clock at the read
	Completed, Failed    float64   // per second since the previous read
	Dead, Retried        float64
	Workers, Running     int // live workers and running handlers at the read
	Concurrency, Covered int // the fleet's concurrency; workers the rates cover
}

// ring is a fixed-size ring of samples, oldest overwritten first.
type ring struct {
	buf  []sample
	next int
	n    int
}

func (r *ring) push(s sample) {
	r.buf[r.next] = s
	r.next = (r.next + 1) % len(r.buf)
	r.n = min(r.n+1, len(r.buf))
}

// all is the samples, oldest first.
func (r *ring) all() []sample {
	out := make([]sample, 0, r.n)
	for i := range r.n {
		out = append(out, r.buf[(r.next-r.n+i+len(r.buf))%len(r.buf)])
	}
	return out
}

type sampler struct {
	client    valkey.Client
	bus       *bus.Bus
	size      int
	maxQueues int

	passes atomic.Int64 // passes done, for tests

	mu    sync.Mutex
	rings map[string]*ring
	prev  map[string]bus.FleetStats
	err   error // of the last pass
}

func newSampler(client valkey.Client, b *bus.Bus, size, maxQueues int) *sampler {
	return &sampler{client: client, bus: b, size: size, maxQueues: maxQueues,
		rings: map[string]*ring{}, prev: map[string]bus.FleetStats{}}
}

// run samples at once and then every interval until ctx ends.
func (s *sampler) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		s.pass(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pass takes one sample of every listed queue.
func (s *sampler) pass(ctx context.Context) {
	defer s.passes.Add(1)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	qs, err := s.bus.Queues(ctx)
	if err != nil {
		s.setErr(err)
		return
	}
	if len(qs) > s.maxQueues {
		qs = qs[:s.maxQueues]
	}
	runs := make([]lua.Run, len(qs))
	for i, q := range qs {
		runs[i], _ = bus.WorkerStatsRun(q.Name) // the registry holds valid names only
	}
	var replies []valkey.ValkeyResult
	if len(runs) > 0 {
		replies, _ = lua.Pipeline(ctx, s.client, runs, nil)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = nil
	seen := make(map[string]bool, len(qs))
	for i, q := range qs {
		seen[q.Name] = true
		fs, err := bus.DecodeWorkerStats(q.Name, replies[i])
		if err != nil {
			s.err = err
			continue
		}
		s.add(q.Name, fs)
	}
	// Over prev, which holds every queue read (rings only those read twice): a queue read
	// once and then gone would else stay in prev for the dashboard's life.
	for name := range s.prev {
		if !seen[name] {
			delete(s.rings, name)
			delete(s.prev, name)
		}
	}
}

// add records fs, the newest read of queue, as a sample against the previous read.
func (s *sampler) add(queue string, fs bus.FleetStats) {
	prev, ok := s.prev[queue]
	s.prev[queue] = fs
	if !ok {
		return
	}
	r := s.rings[queue]
	if r == nil {
		r = &ring{buf: make([]sample, s.size)}
		s.rings[queue] = r
	}
	rt := fs.Rates(prev)
	r.push(sample{
		At: fs.At, Completed: rt.Completed, Failed: rt.Failed, Dead: rt.Dead, Retried: rt.Retried,
		Workers: len(fs.Workers), Running: fs.Total.Running, Concurrency: fs.Concurrency, Covered: rt.Workers,
	})
}

func (s *sampler) setErr(err error) {
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
}

// series is queue's samples, oldest first (nil when it has none yet).
func (s *sampler) series(queue string) []sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.rings[queue]; r != nil {
		return r.all()
	}
	return nil
}

// lastErr is the error of the last pass, if any.
func (s *sampler) lastErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}
