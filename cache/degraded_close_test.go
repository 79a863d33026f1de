package cache_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/tables"
)

// TestDegradedReadCutShortByClose: with Valkey gone, reads are answered by the loader
// (degraded mode). Close cuts short the one whose loader runs and the one waiting for the
// table's only degraded-load slot: both say the cache closed (ErrClosed) and name the table
// and the id, rather than a bare context.Canceled from a context the caller never had.
func TestDegradedReadCutShortByClose(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a dedicated server")
	}
	t.Parallel()
	ctx := context.Background()
	srv := valkeytest.Start(t)
	c, err := cache.New(srv.Client(t), cache.Config{})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	started := make(chan string, 2)
	load := func(ctx context.Context, id string) (int, error) {
		started <- id
		<-ctx.Done() // a loader that respects its context, cut short by Close
		return 0, ctx.Err()
	}
	name := tableName(t)
	tbl, err := cache.NewTable(c, tables.Spec{Name: name, L2Timeout: 10 * time.Second, DegradedLoads: 1}, load, nil)
	require.NoError(t, err)
	require.NoError(t, srv.Kill())
	t.Cleanup(func() { _ = srv.Restart() })

	type result struct {
		id  string
		err error
	}
	errs := make(chan result, 2)
	get := func(id string) { _, err := tbl.Get(ctx, id); errs <- result{id, err} }
	go get("loading")
	require.Equal(t, "loading", recv(t, started, 15*time.Second))
	go get("waiting")
	time.Sleep(300 * time.Millisecond) // "waiting" is waiting for the slot (up to L2Timeout)
	c.Close()
	got := []result{recv(t, errs, 15*time.Second), recv(t, errs, 15*time.Second)}
	for _, r := range got {
		t.Logf("%s cut short: %v", r.id, r.err)
	}
	for _, r := range got {
		require.Error(t, r.err, r.id)
		require.NotEqual(t, context.Canceled, r.err, "%s: a bare context.Canceled", r.id)
		require.ErrorIs(t, r.err, cache.ErrClosed, r.id)
		require.ErrorContains(t, r.err, name, r.id)
		require.ErrorContains(t, r.err, strconv.Quote(r.id))
	}
}
