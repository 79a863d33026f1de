package cache_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/tables"
)

// TestInvalidateReadsOwnWriteUnderFills: readers fill one id over and over while a writer
// moves the truth and invalidates it; the writer's next Get sees at least the version it
// wrote, every time. Forget skips the L1 delete of an id L1 does not hold, so a fill whose
// install is still being applied when Forget looks must be dropped by the install itself.
func TestInvalidateReadsOwnWriteUnderFills(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var truth atomic.Int64
	load := func(context.Context, string) (user, error) {
		return user{Name: strconv.FormatInt(truth.Load(), 10)}, nil
	}
	c, err := cache.New(valkeytest.Shared(t).Client(t), cache.Config{})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	tbl, err := cache.NewTable(c, tables.Spec{Name: tableName(t), L2Timeout: relaxedL2}, load, nil)
	require.NoError(t, err)

	done := make(chan struct{})
	var readers sync.WaitGroup
	for range 3 {
		readers.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				if _, err := tbl.Get(ctx, "k"); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	defer func() { close(done); readers.Wait() }()
	for range 100 {
		v := truth.Add(1)
		require.NoError(t, tbl.Invalidate(ctx, "k"))
		u, err := tbl.Get(ctx, "k")
		require.NoError(t, err)
		got, err := strconv.ParseInt(u.Name, 10, 64)
		require.NoError(t, err)
		require.GreaterOrEqual(t, got, v, "a Get after Invalidate returned served a value loaded before it")
	}
	st := tbl.Stats()
	require.Positive(t, st.L1Hits, "readers were served from L1 between the writes")
}

// TestGetAfterInvalidateStartsItsOwnFill: a fill begun before an Invalidate loads the value
// the invalidation replaces; the writer's next Get, which begins after it, must not join that
// fill and be handed its value, but load afresh. Fills of one generation still share a load.
func TestGetAfterInvalidateStartsItsOwnFill(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var truth, calls atomic.Int64
	release := make(chan struct{})
	load := func(context.Context, string) (user, error) {
		v := truth.Load()
		if calls.Add(1) == 1 {
			<-release // the first fill's loader read the truth, and is slow to return
		}
		return user{Name: strconv.FormatInt(v, 10)}, nil
	}
	c, err := cache.New(valkeytest.Shared(t).Client(t), cache.Config{})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	tbl, err := cache.NewTable(c, tables.Spec{Name: tableName(t), L2Timeout: relaxedL2}, load, nil)
	require.NoError(t, err)
	joined := make(chan struct{}, 4)
	tbl.SetHookJoined(func(string) { joined <- struct{}{} })
	get := func() <-chan user { // a Get of "k" on its own goroutine, once it joined a fill
		out := make(chan user, 1)
		go func() {
			u, err := tbl.Get(ctx, "k")
			assert.NoError(t, err)
			out <- u
		}()
		<-joined
		return out
	}

	first := get()
	valkeytest.Eventually(t, 5*time.Second, "the first fill's loader to run", func() bool { return calls.Load() == 1 })
	truth.Store(1)
	require.NoError(t, tbl.Invalidate(ctx, "k"))
	mine := get()
	select {
	case u := <-mine:
		require.Equal(t, "1", u.Name, "the writer's Get after its Invalidate")
	case <-time.After(2 * time.Second):
		close(release)
		t.Fatalf("the writer's Get after its Invalidate waited on the fill begun before it, and got %q", (<-mine).Name)
	}
	close(release)
	require.Equal(t, "0", (<-first).Name, "the first fill serves its own caller what it loaded")
	require.Equal(t, int64(2), calls.Load())
}
