package cache_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/tables"
)

// regressionFixture is what the tests of a record that goes back in time share: two caches
// (a writer's, a reader's), each with the table that will lose writes (lossy: a1, b1) and one
// that will not (whole: a2, b2). Set is the truth here, not the loader (which answers 0), so
// degraded mode is off, and a read or a write that L2 does not answer within the tables'
// L2Timeout fails the test.
type regressionFixture struct {
	a1, b1, a2, b2 *cache.Table[string, int]
}

// newRegressionFixture declares the four tables with L2Timeout l2 (0: the default, 250 ms):
// relaxedL2 where the server stays up, since degraded mode is off and a healthy server under
// -race on a loaded machine can outlast 250 ms (a Set of the fixture, and a Get of
// readerAnswersLoader, failed so); the default where the test kills or fails over the server,
// so that a read of the lost node gives up at once.
func newRegressionFixture(t *testing.T, ca, cb *cache.Cache, lossy, whole string, l2 time.Duration) *regressionFixture {
	t.Helper()
	load := func(context.Context, string) (int, error) { return 0, nil }
	mk := func(c *cache.Cache, name string) *cache.Table[string, int] {
		tbl, err := cache.NewTable(c, tables.Spec{Name: name, DegradedLoads: tables.Off, L2Timeout: l2}, load, nil)
		require.NoError(t, err)
		return tbl
	}
	return &regressionFixture{a1: mk(ca, lossy), b1: mk(cb, lossy), a2: mk(ca, whole), b2: mk(cb, whole)}
}

// inL1 holds when tbl answers want for id and holds it in L1.
func inL1(tbl *cache.Table[string, int], id string, want int) func() bool {
	return func() bool {
		v, err := tbl.Get(context.Background(), id)
		got, ok := cache.PeekL1(tbl, id)
		return err == nil && v == want && ok && got == want
	}
}

// seed writes k = 1 to the lossy table and j = 1 to the whole one, and waits until the reader
// holds j: every message first, since one arriving after the read would drop what it installed.
func (f *regressionFixture) seed(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, f.a1.Set(ctx, "k", 1))
	require.NoError(t, f.a2.Set(ctx, "j", 1))
	valkeytest.Eventually(t, 10*time.Second, "b2 to receive j", func() bool { return f.b2.Stats().InvalidationsReceived == 1 })
	valkeytest.Eventually(t, 10*time.Second, "b2 to hold j", inL1(f.b2, "j", 1))
}

// awaitForgotten polls the reader's k until it no longer answers old, failing once bound has
// passed since done (the write that reached the regressed record); what it answers then is
// the row as the older record had it (1) or the loader's (0) once the table's rows were
// invalidated after the regression, and it must settle on the loader's.
func (f *regressionFixture) awaitForgotten(t *testing.T, old int, done time.Time, interval, bound time.Duration) {
	t.Helper()
	ctx := context.Background()
	for {
		start := time.Now()
		v, err := f.b1.Get(ctx, "k")
		if err == nil && v != old {
			st := f.b1.Stats()
			t.Logf("b1 stopped serving the old value %v after the write (interval %v): regressions %d, gaps %d, flushes %d",
				start.Sub(done), interval, st.Regressions, st.Gaps, st.Flushes)
			require.Contains(t, []int{0, 1}, v)
			break
		}
		require.False(t, start.After(done.Add(bound)), "b1 still serves %d (%v) %v after the write", v, err, start.Sub(done))
		time.Sleep(5 * time.Millisecond)
	}
	valkeytest.Eventually(t, 10*time.Second, "the rolled-back row invalidated", func() bool {
		v, err := f.b1.Get(ctx, "k")
		return err == nil && v == 0
	})
}

// wholeKept checks that the table that lost nothing keeps its L1 through two reconciles:
// no flush beyond flushes (its count before the fault) and no regression.
func (f *regressionFixture) wholeKept(t *testing.T, flushes int64) {
	t.Helper()
	r2 := f.b2.Stats().Reconciles
	valkeytest.Eventually(t, 10*time.Second, "two reconciles of the whole table", func() bool { return f.b2.Stats().Reconciles >= r2+2 })
	require.Equal(t, flushes, f.b2.Stats().Flushes, "no flush where nothing was lost")
	require.Zero(t, f.b2.Stats().Regressions)
}

// twoCaches is two caches with cfg over one server, the writer's and the reader's, closed
// with the test.
func twoCaches(t *testing.T, srv *valkeytest.Server, cfg cache.Config) (ca, cb *cache.Cache) {
	t.Helper()
	ca, err := cache.New(srv.Client(t), cfg)
	require.NoError(t, err)
	t.Cleanup(ca.Close)
	cb, err = cache.New(srv.Client(t), cfg)
	require.NoError(t, err)
	t.Cleanup(cb.Close)
	return ca, cb
}

// snapshotOf DUMPs the lossy table's record and k's row now, and returns what puts them back
// (RESTORE REPLACE): what a restore from a snapshot taken now does to them.
func (f *regressionFixture) snapshotOf(t *testing.T, admin valkey.Client) (restore func()) {
	t.Helper()
	ctx := context.Background()
	ks := []string{keys.MustTable(f.a1.Spec().Name).Record(), rowKey(t, f.a1, "k")}
	snaps := make([]string, len(ks))
	for i, k := range ks {
		s, err := admin.Do(ctx, admin.B().Dump().Key(k).Build()).ToString()
		require.NoError(t, err)
		snaps[i] = s
	}
	return func() {
		for i, k := range ks {
			require.NoError(t, admin.Do(ctx, admin.B().Restore().Key(k).Ttl(0).SerializedValue(snaps[i]).Replace().Build()).Error())
		}
	}
}

// writeUpTo51 sets k to 2 through 51 and waits until the reader received them all and holds
// 51.
func (f *regressionFixture) writeUpTo51(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for v := 2; v <= 51; v++ {
		require.NoError(t, f.a1.Set(ctx, "k", v))
	}
	valkeytest.Eventually(t, 10*time.Second, "b1 to receive 51 writes", func() bool { return f.b1.Stats().InvalidationsReceived == 51 })
	valkeytest.Eventually(t, 10*time.Second, "b1 to hold the last value", inL1(f.b1, "k", 51))
}

// readerAnswersLoader reads k from the reader until it answers the loader's 0 or deadline
// passes, and returns the last answer.
func (f *regressionFixture) readerAnswersLoader(t *testing.T, deadline time.Time) int {
	t.Helper()
	for {
		v, err := f.b1.Get(context.Background(), "k")
		require.NoError(t, err)
		if v == 0 || time.Now().After(deadline) {
			return v
		}
		time.Sleep(10 * time.Millisecond)
	}
}
