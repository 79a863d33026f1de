package cache_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// TestRegressionSeenByMessage: the lossy table's record and row k go back in time (RESTORE of
// a DUMP taken after the first write, as a restore from a snapshot does to them), and the next
// write's message carries a seq below the one the reader applied last. That message alone must
// tell the reader its table went back: the reconcile interval is a minute, so no reconcile
// runs during the test. The reader must stop answering its L1's 51 at once and, once the
// table's rows are invalidated, answer the loader's 0, not the restored row's 1.
func TestRegressionSeenByMessage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := valkeytest.Start(t, valkeytest.WithoutPersistence())
	admin := srv.Client(t)
	cfg := cache.Config{ReconcileInterval: time.Minute}
	ca, err := cache.New(srv.Client(t), cfg)
	require.NoError(t, err)
	t.Cleanup(ca.Close)
	cb, err := cache.New(srv.Client(t), cfg)
	require.NoError(t, err)
	t.Cleanup(cb.Close)
	lossy, whole := tableName(t), tableName(t)
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
	reconciles := b1.Stats().Reconciles

	for _, k := range []struct{ key, snap string }{{record, snapRecord}, {row, snapRow}} {
		require.NoError(t, admin.Do(ctx, admin.B().Restore().Key(k.key).Ttl(0).SerializedValue(k.snap).Replace().Build()).Error())
	}
	// The write after the restore: seq 2 where the reader applied 51.
	require.NoError(t, a1.Set(ctx, "x", 999))
	done := time.Now()
	valkeytest.Eventually(t, 10*time.Second, "b1 to receive the write after the restore", func() bool { return b1.Stats().InvalidationsReceived >= 52 })

	var v int
	deadline := done.Add(5 * time.Second)
	for {
		v, err = b1.Get(ctx, "k")
		require.NoError(t, err)
		if v == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	st := b1.Stats()
	t.Logf("b1 answers k = %d %v after the write: regressions %d, gaps %d, flushes %d, reconciles %d (before the restore %d)",
		v, time.Since(done), st.Regressions, st.Gaps, st.Flushes, st.Reconciles, reconciles)
	require.Positive(t, st.Regressions, "the message below the applied seq is a regression")
	require.Equal(t, 0, v, "b1 still answers %d: the message did not tell it the table went back", v)
}
