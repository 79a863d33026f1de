package cache_test

import (
	"context"
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

// TestNewTableUnderTraffic: declaring a table re-subscribes the cache's channels (a new
// subscription, confirmed before the old one ends), while another process writes a table the
// cache follows and the cache's handler is slow now and then. During the overlap both
// subscriptions deliver that table's messages; one delivered by the new subscription before
// the old one delivered the message before it must not be taken for a rollback (a whole-table
// invalidation of a table nothing rolled back): 4 to 7 of them in 10 declarations before the
// new subscription's messages were held until the old one ended (subscription.go). Each declaration
// may still cost a gap (what the old subscription had not handled when it ended).
func TestNewTableUnderTraffic(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := valkeytest.Shared(t)
	src := newDB()
	reader, err := cache.New(srv.Client(t), cache.Config{})
	require.NoError(t, err)
	t.Cleanup(reader.Close)
	// A slow handler now and then (a long OnInvalidation): it widens the window in which the
	// two subscriptions' messages could pass each other.
	var seen atomic.Int64
	reader.SetHookMessage(func(string, []byte) bool {
		if seen.Add(1)%32 == 0 {
			time.Sleep(2 * time.Millisecond)
		}
		return true
	})
	writer, err := cache.New(srv.Client(t), cache.Config{})
	require.NoError(t, err)
	t.Cleanup(writer.Close)
	spec := tables.Spec{Name: tableName(t)}
	followed, err := cache.NewTable(reader, spec, src.load, nil)
	require.NoError(t, err)
	w, err := cache.NewTable(writer, spec, src.load, nil)
	require.NoError(t, err)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := w.Invalidate(ctx, strconv.Itoa(i%100)); err != nil {
				t.Error(err)
				return
			}
		}
	})
	for i := range 10 {
		s := spec
		s.Name = tableName(t) + "-" + strconv.Itoa(i)
		_, err := cache.NewTable(reader, s, src.load, nil)
		require.NoError(t, err)
		time.Sleep(5 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	st := followed.Stats()
	t.Logf("followed table: received %d, gaps %d, regressions %d, flushes %d", st.InvalidationsReceived, st.Gaps, st.Regressions, st.Flushes)
	require.Positive(t, st.InvalidationsReceived)
	require.Zero(t, st.Regressions, "no record went back")
}
