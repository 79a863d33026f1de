package cache_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// TestRegressionPastAGap: the lossy table's record and row k go back in time (RESTORE
// of a DUMP taken earlier: what a restore from a snapshot does to them), then writes push its
// sequence past the point the reader saw while the reader loses their messages, so the first
// message it gets after them jumps ahead: a gap. The record is not on the sequence the reader
// followed (its chain names another token at the reader's old seq), so this is a regression,
// and the table's rows must be invalidated: the reader must not keep answering k's restored
// row (1) past a reconcile or two; it settles on the loader's 0.
func TestRegressionPastAGap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const interval = time.Second
	srv := valkeytest.Start(t, valkeytest.WithoutPersistence())
	admin := srv.Client(t)
	cfg := cache.Config{ReconcileInterval: interval}
	ca, err := cache.New(srv.Client(t), cfg)
	require.NoError(t, err)
	t.Cleanup(ca.Close)
	cb, err := cache.New(srv.Client(t), cfg)
	require.NoError(t, err)
	t.Cleanup(cb.Close)
	lossy, whole := tableName(t), tableName(t)
	// Every process loses the messages (as across a restart, before their subscriptions are
	// back): one that saw the first write after the restore would tell everyone.
	var dropA, dropB atomic.Int64 // how many of the lossy table's next messages each loses
	for c, drop := range map[*cache.Cache]*atomic.Int64{ca: &dropA, cb: &dropB} {
		c.SetHookMessage(func(table string, _ []byte) bool { return table != lossy || drop.Add(-1) < 0 })
	}
	f := newRegressionFixture(t, ca, cb, lossy, whole)
	a1, b1 := f.a1, f.b1
	f.seed(t)

	record := keys.MustTable(lossy).Record()
	row := rowKey(t, a1, "k")
	dump := func(key string) string {
		s, err := admin.Do(ctx, admin.B().Dump().Key(key).Build()).ToString()
		require.NoError(t, err)
		return s
	}
	snapRecord, snapRow := dump(record), dump(row)
	for v := 2; v <= 51; v++ {
		require.NoError(t, a1.Set(ctx, "k", v))
	}
	valkeytest.Eventually(t, 10*time.Second, "b1 to receive 51 writes", func() bool { return b1.Stats().InvalidationsReceived == 51 })
	valkeytest.Eventually(t, 10*time.Second, "b1 to hold the last value", inL1(b1, "k", 51))

	// The restore, then 51 writes whose messages are lost, then one it gets: seq 53 after 51.
	dropA.Store(51)
	dropB.Store(51)
	for _, k := range []struct{ key, snap string }{{record, snapRecord}, {row, snapRow}} {
		require.NoError(t, admin.Do(ctx, admin.B().Restore().Key(k.key).Ttl(0).SerializedValue(k.snap).Replace().Build()).Error())
	}
	for i := range 51 {
		require.NoError(t, a1.Set(ctx, "x", i))
	}
	require.NoError(t, a1.Set(ctx, "x", 999))
	done := time.Now()
	valkeytest.Eventually(t, 10*time.Second, "b1 to see the gap", func() bool { return b1.Stats().Gaps > 0 })

	// Within a reconcile or two, k's restored row must be gone.
	var v int
	deadline := done.Add(3 * interval)
	for {
		v, err = b1.Get(ctx, "k")
		require.NoError(t, err)
		if v == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	st := b1.Stats()
	t.Logf("b1 answers k = %d %v after the write: regressions %d, gaps %d, flushes %d, reconciles %d",
		v, time.Since(done), st.Regressions, st.Gaps, st.Flushes, st.Reconciles)
	require.Equal(t, 0, v, "b1 still answers the restored row's value")
}
