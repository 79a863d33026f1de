package cache_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
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
	ca, cb := twoCaches(t, srv, cache.Config{ReconcileInterval: time.Minute})
	lossy, whole := tableName(t), tableName(t)
	f := newRegressionFixture(t, ca, cb, lossy, whole, relaxedL2)
	a1, b1 := f.a1, f.b1
	f.seed(t)

	restore := f.snapshotOf(t, srv.Client(t))
	f.writeUpTo51(t)
	reconciles := b1.Stats().Reconciles

	restore()
	// The write after the restore: seq 2 where the reader applied 51.
	require.NoError(t, a1.Set(ctx, "x", 999))
	done := time.Now()
	valkeytest.Eventually(t, 10*time.Second, "b1 to receive the write after the restore", func() bool { return b1.Stats().InvalidationsReceived >= 52 })

	v := f.readerAnswersLoader(t, done.Add(5*time.Second))
	st := b1.Stats()
	t.Logf("b1 answers k = %d %v after the write: regressions %d, gaps %d, flushes %d, reconciles %d (before the restore %d)",
		v, time.Since(done), st.Regressions, st.Gaps, st.Flushes, st.Reconciles, reconciles)
	require.Positive(t, st.Regressions, "the message below the applied seq is a regression")
	require.Equal(t, 0, v, "b1 still answers %d: the message did not tell it the table went back", v)
}
