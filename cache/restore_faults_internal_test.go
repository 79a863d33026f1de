package cache

import (
	"context"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/tables"
)

var restoreSeq atomic.Int64

func restoreName(t *testing.T) string {
	return "restore." + strconv.FormatInt(time.Now().UnixNano()%1e9, 36) + "." + strconv.FormatInt(restoreSeq.Add(1), 36)
}

type restorePair struct {
	a, b   *Table[string, int]
	ca, cb *Cache
	admin  valkey.Client
	name   string
}

func newRestorePair(t *testing.T, interval time.Duration, hook func(table string, payload []byte) bool) *restorePair {
	srv := valkeytest.Shared(t)
	cfg := Config{ReconcileInterval: interval, Logger: slog.New(slog.DiscardHandler)}
	ca, err := New(srv.Client(t), cfg)
	require.NoError(t, err)
	t.Cleanup(ca.Close)
	cb, err := New(srv.Client(t), cfg)
	require.NoError(t, err)
	t.Cleanup(cb.Close)
	if hook != nil {
		cb.coh.hookMessage = hook
	}
	name := restoreName(t)
	load := func(context.Context, string) (int, error) { return 0, nil }
	spec := tables.Spec{Name: name, DegradedLoads: tables.Off, L2Timeout: 10 * time.Second}
	a, err := NewTable(ca, spec, load, nil)
	require.NoError(t, err)
	b, err := NewTable(cb, spec, load, nil)
	require.NoError(t, err)
	require.True(t, a.Synced() && b.Synced())
	return &restorePair{a: a, b: b, ca: ca, cb: cb, admin: srv.Client(t), name: name}
}

func (p *restorePair) recordKey() string { return p.a.decl.Shards[0].Record() }
func (p *restorePair) rowKey(t *testing.T, id string) string {
	k, err := p.a.decl.KeysFor(id).Row(id)
	require.NoError(t, err)
	return k
}

// dump returns what puts keys back as they are now (RESTORE REPLACE; a key absent now is
// deleted): a restore from a snapshot taken now.
func (p *restorePair) dump(t *testing.T, ks ...string) func() {
	ctx := context.Background()
	snaps := make([]string, len(ks))
	present := make([]bool, len(ks))
	for i, k := range ks {
		s, err := p.admin.Do(ctx, p.admin.B().Dump().Key(k).Build()).ToString()
		if valkey.IsValkeyNil(err) {
			continue
		}
		require.NoError(t, err)
		snaps[i], present[i] = s, true
	}
	return func() {
		for i, k := range ks {
			if !present[i] {
				require.NoError(t, p.admin.Do(ctx, p.admin.B().Del().Key(k).Build()).Error())
				continue
			}
			require.NoError(t, p.admin.Do(ctx, p.admin.B().Restore().Key(k).Ttl(0).SerializedValue(snaps[i]).Replace().Build()).Error())
		}
	}
}

// TestRestoreBeforeInvalidateAll: k = 1, snapshot, k = 2 (and, in one case, an InvalidateAll:
// a new epoch), restore (the record back at its snapshot, the row k = 1 back), one more
// write. Whether or not the snapshot is from an epoch the reader has left, the reader stops
// serving k = 1 within a few reconcile intervals: the regression is recognised and the
// table's rows invalidated.
func TestRestoreBeforeInvalidateAll(t *testing.T) {
	for _, withInvalidateAll := range []bool{false, true} {
		t.Run("InvalidateAll="+strconv.FormatBool(withInvalidateAll), func(t *testing.T) {
			const interval = 200 * time.Millisecond
			p := newRestorePair(t, interval, nil)
			ctx := context.Background()
			require.NoError(t, p.a.Set(ctx, "k", 1))
			valkeytest.Eventually(t, 10*time.Second, "b receives 1", func() bool { return p.b.Stats().InvalidationsReceived == 1 })
			restore := p.dump(t, p.recordKey(), p.rowKey(t, "k"))
			require.NoError(t, p.a.Set(ctx, "k", 2))
			want := int64(2)
			if withInvalidateAll {
				require.NoError(t, p.a.InvalidateAll(ctx))
				want++
			}
			valkeytest.Eventually(t, 10*time.Second, "b receives every write", func() bool { return p.b.Stats().InvalidationsReceived == want })
			restore()
			require.NoError(t, p.a.Set(ctx, "x", 5))
			deadline := time.Now().Add(5 * interval)
			var v int
			for time.Now().Before(deadline) {
				var err error
				v, err = p.b.Get(ctx, "k")
				require.NoError(t, err)
				if v != 1 {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			st := p.b.Stats()
			t.Logf("reader: k=%d regressions=%d flushes=%d reconciles=%d", v, st.Regressions, st.Flushes, st.Reconciles)
			require.NotEqual(t, 1, v, "the reader still serves k=1, which Set(k, 2) replaced, 5 reconcile intervals after the restore")
		})
	}
}

// msgGate is a reader's message hook for one table: pass-through until blocked; while
// blocked the handler waits (a slow subscriber: later messages queue behind it); once
// released it delivers the first deliver messages that reached it and drops the rest.
type msgGate struct {
	table   string
	blocked atomic.Bool
	release chan struct{}
	deliver int64
	seen    atomic.Int64
}

func (g *msgGate) hook(table string, _ []byte) bool {
	if table != g.table || !g.blocked.Load() {
		return true
	}
	<-g.release
	return g.seen.Add(1) <= g.deliver
}

// gatedReader is a reader cache with the table, whose messages go through a gate, and a
// writer cache that runs the table's scripts without declaring it (so that only the reader
// follows the sequence).
type gatedReader struct {
	b    *Table[string, int]
	cb   *Cache
	ca   *Cache
	tk   tableKeys
	gate *msgGate
	adm  valkey.Client
}

func newGatedReader(t *testing.T, interval time.Duration, deliver int64) *gatedReader {
	srv := valkeytest.Shared(t)
	cfg := Config{ReconcileInterval: interval, Logger: slog.New(slog.DiscardHandler)}
	ca, err := New(srv.Client(t), cfg)
	require.NoError(t, err)
	t.Cleanup(ca.Close)
	cb, err := New(srv.Client(t), cfg)
	require.NoError(t, err)
	t.Cleanup(cb.Close)
	name := restoreName(t)
	g := &msgGate{table: name, release: make(chan struct{}), deliver: deliver}
	t.Cleanup(func() {
		select {
		case <-g.release:
		default:
			close(g.release)
		}
	})
	cb.coh.hookMessage = g.hook
	load := func(context.Context, string) (int, error) { return 0, nil }
	b, err := NewTable(cb, tables.Spec{Name: name, DegradedLoads: tables.Off, L2Timeout: 10 * time.Second}, load, nil)
	require.NoError(t, err)
	require.True(t, b.Synced())
	return &gatedReader{b: b, cb: cb, ca: ca, tk: coherenceKeys(b.decl.Shards[0]), gate: g, adm: srv.Client(t)}
}

func (r *gatedReader) set(t *testing.T, id string, v int) {
	tok := r.ca.writeToken()
	px := time.Minute
	row := valueRow(tok, 0, wallExpiry(px), []byte(strconv.Itoa(v)))
	ok, err := r.ca.setRow(context.Background(), r.tk, tok, id, row, px)
	require.NoError(t, err)
	require.True(t, ok)
}

func (r *gatedReader) inval(t *testing.T, id string) {
	require.NoError(t, r.ca.invalidateRows(context.Background(), r.tk, []string{id}))
}

func (r *gatedReader) ts() *tableState { return r.b.cs.shards[0] }

// afterReconcile waits until the reader's reconcile count passes n.
func (r *gatedReader) afterReconcile(t *testing.T, n int64) int64 {
	valkeytest.Eventually(t, 10*time.Second, "a reconcile", func() bool { return r.ts().reconciles.Load() > n })
	return r.ts().reconciles.Load()
}

// TestRollbackBelowAppliedSinceSeenE2E: TestRollbackBelowAppliedSinceSeen through the real
// loop. The reader is at 1 (k = 1 in L2). Its handler is slow from now on (the gate holds it).
// Write 2 (y), then write 3 deletes k (the database changed: the loader answers 0). The
// record and the row k go back to just after write 2 (a lagging replica promoted), and three
// writes (3', 4', 5') follow, their messages lost. A reconcile reads the record (5'); within
// its grace the slow handler delivers the messages of writes 2 and 3 (then loses the rest).
// The reader applied write 3, which the record no longer has: a regression, and the row k = 1
// that came back is invalidated, so the reader answers the loader's 0.
func TestRollbackBelowAppliedSinceSeenE2E(t *testing.T) {
	const interval = 500 * time.Millisecond // grace 100 ms
	r := newGatedReader(t, interval, 2)
	ctx := context.Background()
	r.set(t, "k", 1)
	valkeytest.Eventually(t, 10*time.Second, "the reader at 1", func() bool { return r.b.Stats().InvalidationsReceived == 1 })
	n := r.afterReconcile(t, r.ts().reconciles.Load())
	r.gate.blocked.Store(true)
	r.set(t, "y", 1)
	p := &restorePair{a: r.b, admin: r.adm}
	restore := p.dump(t, p.recordKey(), p.rowKey(t, "k"))
	r.inval(t, "k")
	restore()
	for v := range 3 {
		r.set(t, "z", v)
	}
	r.afterReconcile(t, n) // read the record at 5'
	close(r.gate.release)  // the messages of 2 and 3 arrive within the grace
	time.Sleep(3 * interval)
	v, err := r.b.Get(ctx, "k")
	require.NoError(t, err)
	st := r.b.Stats()
	t.Logf("reader: k=%d regressions=%d gaps=%d flushes=%d received=%d", v, st.Regressions, st.Gaps, st.Flushes, st.InvalidationsReceived)
	require.Equal(t, int64(3), st.InvalidationsReceived, "the seed, then writes 2 and 3 applied (3', 4', 5' lost)")
	require.Equal(t, 0, v, "k = 1 came back with the rolled-back row and is still served")
}

// TestLateMessagesAfterVerifyE2E: TestLateMessagesAfterVerify through the real loop. Nothing
// goes back in time and nothing is lost: the reader's handler is merely slower than the
// reconcile's grace. Rows j (untouched) and x. The reader is at 1; its handler then stalls
// while three writes of x are made; a reconcile reads the record (4), waits its grace and
// moves there; then the three messages arrive. No regression is reported, and row j stays.
func TestLateMessagesAfterVerifyE2E(t *testing.T) {
	const interval = 500 * time.Millisecond // grace 100 ms
	r := newGatedReader(t, interval, 1<<30)
	ctx := context.Background()
	r.set(t, "j", 1)
	valkeytest.Eventually(t, 10*time.Second, "the reader at 1", func() bool { return r.b.Stats().InvalidationsReceived == 1 })
	n := r.afterReconcile(t, r.ts().reconciles.Load())
	r.gate.blocked.Store(true)
	for v := range 3 {
		r.set(t, "x", v)
	}
	r.afterReconcile(t, n)
	valkeytest.Eventually(t, 10*time.Second, "the reconcile's verify", func() bool {
		ts := r.ts()
		ts.mu.Lock()
		defer ts.mu.Unlock()
		return ts.seq == 4
	})
	close(r.gate.release) // the three messages, late
	deadline := time.Now().Add(5 * time.Second)
	for r.b.Stats().InvalidationsReceived < 4 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(2 * interval)
	st := r.b.Stats()
	exists, err := r.adm.Do(ctx, r.adm.B().Exists().Key((&restorePair{a: r.b}).rowKey(t, "j")).Build()).AsInt64()
	require.NoError(t, err)
	t.Logf("reader: regressions=%d gaps=%d flushes=%d; row j exists=%d", st.Regressions, st.Gaps, st.Flushes, exists)
	require.Zero(t, st.Regressions, "no record went back: a regression is false")
	require.Equal(t, int64(1), exists, "row j, never written since, was deleted by a false whole-table invalidation")
}

// TestOwedInvalidationKeepsTableDegraded: an InvalidateAll refused while the breaker is open
// is owed; the probe that finds Valkey back fails to send it (as a cache_flush walk of a large
// table that outlasts one reconcile's period does). The breaker closes, but the table owes:
// its reads go to the loader, not to the L2 row the owed invalidation is to delete, until it
// is sent; then the table leaves degraded mode.
func TestOwedInvalidationKeepsTableDegraded(t *testing.T) {
	srv := valkeytest.Shared(t)
	c, err := New(srv.Client(t), Config{ReconcileInterval: 300 * time.Millisecond, BreakerProbe: 50 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	var truth atomic.Int64
	truth.Store(1)
	load := func(context.Context, string) (int, error) { return int(truth.Load()), nil }
	a, err := NewTable(c, tables.Spec{Name: restoreName(t), L2Timeout: 10 * time.Second}, load, nil)
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, a.Set(ctx, "k", 1))
	var failing atomic.Bool
	failing.Store(true)
	c.hookFlushStep = func() error {
		if failing.Load() {
			return context.DeadlineExceeded
		}
		return nil
	}
	for range DefaultBreakerFailures {
		c.brk.observe(l2err("GET", "x", context.DeadlineExceeded))
	}
	require.False(t, c.brk.allow(), "breaker open")
	truth.Store(2) // the database changed, and the whole table is invalidated
	require.Error(t, a.InvalidateAll(ctx))
	require.Equal(t, -1, a.pending.count(), "a whole-table invalidation is owed")
	valkeytest.Eventually(t, 10*time.Second, "the breaker to close", func() bool { return c.brk.allow() })
	v, tier, err := a.Lookup(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, 2, v, "read while the invalidation is owed: not the L2 row it is to delete")
	require.Equal(t, TierDegraded, tier)
	require.True(t, a.Stats().Degraded, "a table that owes stays degraded after the breaker closed")
	failing.Store(false) // the next reconcile sends it
	valkeytest.Eventually(t, 10*time.Second, "the owed invalidation sent and degraded mode left", func() bool {
		return a.pending.count() == 0 && !a.Stats().Degraded
	})
	a.l1.Clear() // the degraded load's short-lived entry
	v, tier, err = a.Lookup(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, 2, v)
	require.Equal(t, TierFill, tier, "the row was deleted by the invalidation: filled from the loader")
}
