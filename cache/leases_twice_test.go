package cache_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/tables"
)

// TestTwoLeasesOfOneProcess: two reads of one id in one process both take the fill lease,
// because another process's invalidation deleted the first lease between their SET NX, and
// the read whose lease the row holds now offers it before the other one does. The fill must
// load under the lease the row holds: this process took it. (It once kept one offered lease
// per id, the last offered, and its fill then waited out the row's lease, LeaseTTL: the hot
// key of `make demo` stalled every read of it for 5.5 s a few times a minute.)
func TestTwoLeasesOfOneProcess(t *testing.T) {
	t.Parallel()
	client := valkeytest.Shared(t).Client(t)
	src := &source{}
	tbl := newTable(t, newCache(t, client), tables.Spec{Name: tableName(t)}, src)
	key := rowKey(t, tbl, "k")

	// Read b takes the first lease and waits before offering it; the row is then deleted (the
	// other process's invalidation, whose message has not arrived); read a takes the second
	// lease, offers it and leads the fill, which waits until b has offered its lease and
	// joined the fill too.
	bLeased, bGo, bJoined := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var leases, reads atomic.Int32
	tbl.SetHookLeased(func(string) {
		if leases.Add(1) == 1 {
			close(bLeased)
			<-bGo
		}
	})
	tbl.SetHookJoined(func(string) {
		if reads.Add(1) == 2 {
			close(bJoined)
		}
	})
	aWaits := make(chan struct{})
	var fillReads atomic.Int32
	tbl.SetHookAfterRead(func(string) {
		if fillReads.Add(1) == 1 {
			close(aWaits)
			<-bJoined
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type got struct {
		took time.Duration
		err  error
	}
	run := func(out chan<- got) {
		start := time.Now()
		_, err := tbl.Get(ctx, "k")
		out <- got{time.Since(start), err}
	}
	bDone, aDone := make(chan got, 1), make(chan got, 1)
	go run(bDone)
	<-bLeased
	require.NoError(t, client.Do(ctx, client.B().Del().Key(key).Build()).Error())
	go run(aDone)
	<-aWaits // a leads the fill, paused before it acts on its read
	close(bGo)
	for name, ch := range map[string]chan got{"a": aDone, "b": bDone} {
		g := <-ch
		require.NoError(t, g.err, name)
		t.Logf("read %s took %v", name, g.took)
		require.Less(t, g.took, tbl.Spec().LeaseTTL()/2, "read %s waited out a lease its own process took", name)
	}
	require.Equal(t, int64(1), src.calls.Load(), "one load")
	require.NotEmpty(t, readRaw(t, client, key), "the value row")
}
