package cache_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/tables"
)

// gauge counts calls in flight and keeps the most seen at once.
type gauge struct{ now, max atomic.Int64 }

func (g *gauge) enter() {
	n := g.now.Add(1)
	for m := g.max.Load(); n > m && !g.max.CompareAndSwap(m, n); m = g.max.Load() {
	}
}

func (g *gauge) leave() { g.now.Add(-1) }

// TestOutageDegradedMode: valkey-server SIGSTOPped for 5 s under a read load without caller
// deadlines. Every Get returns within the bound, answered by the loader (degraded mode) with
// at most DegradedLoads loader calls at once; the breaker opens; after SIGCONT the table
// leaves degraded mode within one reconcile interval; the truth checker (the writer commits
// and invalidates throughout, its refused invalidations sent after the outage) finds no
// read staler than the bound.
func TestOutageDegradedMode(t *testing.T) {
	valkeytest.Timing(t)
	if testing.Short() {
		t.Skip("stops a dedicated server for 5 s")
	}
	t.Parallel()
	const (
		interval   = time.Second
		l2Timeout  = tables.DefaultL2Timeout
		loadDelay  = 10 * time.Millisecond
		slots      = 3
		readers    = 8
		nkeys      = 400
		outage     = 5 * time.Second
		staleBound = interval + slack
	)
	// A read may meet the outage at its row read, or at the fill's lease after a read that
	// succeeded: two L2 timeouts, then the loader.
	latencyBound := 2*l2Timeout + loadDelay + slack
	ctx := context.Background()
	srv := valkeytest.Start(t)
	truth := newDB()
	var loads gauge
	var counting atomic.Bool
	var countedMax atomic.Int64
	load := func(ctx context.Context, id string) (int, error) {
		loads.enter()
		defer loads.leave()
		if counting.Load() {
			n := loads.now.Load()
			for m := countedMax.Load(); n > m && !countedMax.CompareAndSwap(m, n); m = countedMax.Load() {
			}
		}
		time.Sleep(loadDelay)
		return truth.load(ctx, id)
	}
	c, err := cache.New(srv.Client(t), cache.Config{ReconcileInterval: interval, BreakerProbe: 200 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	tbl, err := cache.NewTable(c, tables.Spec{Name: tableName(t), L1TTL: 100 * time.Millisecond, L2Timeout: l2Timeout, DegradedLoads: slots}, load, nil)
	require.NoError(t, err)

	h := newHistory()
	var stop atomic.Bool
	var reads, stale, errs, degradedReads atomic.Int64
	var worstLatency, worstStale atomic.Int64
	var wg sync.WaitGroup
	for r := range readers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(r), 1))
			for !stop.Load() {
				id := strconv.Itoa(rng.IntN(nkeys))
				start := time.Now()
				v, tier, err := tbl.Lookup(ctx, id)
				d := time.Since(start)
				for m := worstLatency.Load(); int64(d) > m && !worstLatency.CompareAndSwap(m, int64(d)); m = worstLatency.Load() {
				}
				if err != nil {
					errs.Add(1)
					t.Errorf("Get(%s) after %v: %v", id, d, err)
					continue
				}
				reads.Add(1)
				if tier == cache.TierDegraded {
					degradedReads.Add(1)
				}
				if s := h.staleness(id, v, start); s > 0 {
					for m := worstStale.Load(); int64(s) > m && !worstStale.CompareAndSwap(m, int64(s)); m = worstStale.Load() {
					}
					if s > staleBound {
						stale.Add(1)
					}
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
	// The writer commits to the source of truth and invalidates, outage or not: an
	// Invalidate refused during the outage is sent when Valkey is back.
	var refused atomic.Int64
	wg.Go(func() {
		for i := 0; !stop.Load(); i++ {
			id := strconv.Itoa(i % nkeys)
			v := truth.bump(id)
			h.wrote(id, v, time.Now())
			wctx, cancel := context.WithTimeout(ctx, time.Second)
			if err := tbl.Invalidate(wctx, id); err != nil {
				refused.Add(1)
			}
			cancel()
			time.Sleep(5 * time.Millisecond)
		}
	})
	time.Sleep(time.Second)
	// A loaded machine may have opened the breaker already (an L2Timeout is tight on a loaded machine).
	opensBefore := tbl.Stats().BreakerOpens
	valkeytest.Eventually(t, 10*time.Second, "the breaker to be closed", func() bool { return !tbl.Stats().Degraded })
	require.NoError(t, srv.Stop())
	stopped := time.Now()
	valkeytest.Eventually(t, 5*time.Second, "the breaker to open", func() bool { return tbl.Stats().BreakerOpens > opensBefore })
	opened := time.Since(stopped)
	before := degradedReads.Load()
	time.Sleep(2 * loadDelay) // fills that held a lease before the stop have finished loading
	counting.Store(true)
	time.Sleep(time.Until(stopped.Add(outage)))
	counting.Store(false)
	duringOutage := degradedReads.Load() - before
	st := tbl.Stats()
	require.True(t, st.Degraded)
	require.NoError(t, srv.Continue())
	resumed := time.Now()
	valkeytest.Eventually(t, 10*time.Second, "the table to leave degraded mode", func() bool { return !tbl.Stats().Degraded })
	left := time.Since(resumed)
	time.Sleep(time.Second)
	stop.Store(true)
	wg.Wait()
	end := tbl.Stats()
	t.Logf("breaker opened %v after SIGSTOP; %d reads (%d degraded, %d during the outage after the breaker opened), %d errors; worst Get latency %v (bound %v); "+
		"most loader calls at once while open %d (slots %d); left degraded mode %v after SIGCONT (interval %v); worst staleness %v (bound %v); degraded loads %d, breaker opens %d, invalidations refused %d",
		opened, reads.Load(), degradedReads.Load(), duringOutage, errs.Load(), time.Duration(worstLatency.Load()), latencyBound,
		countedMax.Load(), slots, left, interval, time.Duration(worstStale.Load()), staleBound, end.DegradedLoads, end.BreakerOpens, refused.Load())
	require.Zero(t, errs.Load(), "every read is answered")
	require.Less(t, time.Duration(worstLatency.Load()), latencyBound)
	require.Positive(t, duringOutage, "reads during the outage came from the loader")
	require.LessOrEqual(t, countedMax.Load(), int64(slots))
	require.Positive(t, countedMax.Load())
	require.LessOrEqual(t, left, interval)
	require.Zero(t, stale.Load(), "reads staler than the bound")
	require.Greater(t, end.BreakerOpens, opensBefore)
	require.False(t, end.Degraded)
	require.Positive(t, refused.Load(), "writes during the outage were refused")
	require.Zero(t, end.PendingInvalidations, "and sent after it")
}
