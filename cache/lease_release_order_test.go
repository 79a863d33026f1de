package cache_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/tables"
)

// leasesApart is a client that sends the cache's SET commands (its fill leases) over a
// connection of their own and everything else over the client's. A standalone valkey-go
// client spreads its commands over several connections at random anyway; this fixes which
// ones, so that a test can tell which of them a stopped server serves first once continued.
type leasesApart struct {
	valkey.Client
	leases valkey.Client
}

func isSet(cmd valkey.Completed) bool { return strings.EqualFold(cmd.Commands()[0], "SET") }

func (c leasesApart) Do(ctx context.Context, cmd valkey.Completed) valkey.ValkeyResult {
	if isSet(cmd) {
		return c.leases.Do(ctx, cmd)
	}
	return c.Client.Do(ctx, cmd)
}

func (c leasesApart) DoMulti(ctx context.Context, cmds ...valkey.Completed) []valkey.ValkeyResult {
	if len(cmds) > 0 && isSet(cmds[0]) {
		return c.leases.DoMulti(ctx, cmds...)
	}
	return c.Client.DoMulti(ctx, cmds...)
}

// TestLostLeaseGivenBackWhenItsReleaseRanFirst: a miss's read (SET NX GET) sent to a stopped
// server times out, and the read gives its lease back in the background (as in
// TestLostReadReleasesItsLease). The release travels on another connection than the lease,
// one the stopped server had data waiting on first, so once continued the server runs the
// release first: it finds no lease. The lease lands right after; it must still be given
// back, not left for every process to wait out for LeaseTTL.
func TestLostLeaseGivenBackWhenItsReleaseRanFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := valkeytest.Start(t, valkeytest.WithoutPersistence())
	admin := srv.Client(t)
	main, leases := srv.Client(t), srv.Client(t)
	src := &source{}
	const l2Timeout = 500 * time.Millisecond
	spec := tables.Spec{Name: tableName(t), L2Timeout: l2Timeout, DegradedLoads: tables.Off, LoaderTimeout: 10 * time.Second}
	tbl := newTable(t, newCache(t, leasesApart{Client: main, leases: leases}), spec, src)
	key := rowKey(t, tbl, "k")
	_, err := tbl.Get(ctx, "warm") // the scripts are loaded: a release is one round trip
	require.NoError(t, err)

	var dialed sync.WaitGroup // a client dials its connections lazily: dial them all now
	for range 64 {
		for _, c := range []valkey.Client{main, leases} {
			dialed.Go(func() { _ = c.Do(ctx, c.B().Get().Key("pad").Build()) })
		}
	}
	dialed.Wait()
	setsBefore := setCalls(t, srv)
	require.NoError(t, srv.Stop())
	stopped := true
	t.Cleanup(func() {
		if stopped {
			_ = srv.Continue()
		}
	})
	// A command waits on every connection of main (64 spread at random over its 4) before the
	// read's lease is sent on leases': once continued, the server serves main's connections
	// first, the release that will follow on one of them included.
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for range 64 {
		go func() { _ = main.Do(pctx, main.B().Get().Key("pad").Build()) }()
	}
	time.Sleep(100 * time.Millisecond)
	_, err = tbl.Get(ctx, "k")
	require.ErrorIs(t, err, cache.ErrL2Timeout)
	time.Sleep(l2Timeout / 4) // the first release is sent, and waits for its reply
	require.NoError(t, srv.Continue())
	stopped = false
	continued := time.Now()
	valkeytest.Eventually(t, 5*time.Second, "the server to run the lost lease write", func() bool {
		return setCalls(t, srv) == setsBefore+1
	})
	valkeytest.Eventually(t, 5*time.Second, "the lost read's lease to be given back", func() bool {
		return readRaw(t, admin, key) == ""
	})
	require.Less(t, time.Since(continued), tbl.Spec().LeaseTTL()/2, "well before the lease would expire")
	require.Equal(t, int64(1), src.calls.Load(), "the warm-up's load only")
}

// setCalls is how many SET commands srv has run (INFO commandstats).
func setCalls(t *testing.T, srv *valkeytest.Server) int {
	t.Helper()
	info, err := srv.Do(context.Background(), "INFO", "commandstats")
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_set:calls="); ok {
			n, err := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			require.NoError(t, err)
			return n
		}
	}
	return 0
}
