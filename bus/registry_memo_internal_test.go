package bus

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/internal/valkeytest"
)

// TestRegistryMemoCountsNamesOnce: many first writes to one new queue at once (producers
// starting together) list it, and the memo's bound counts it once: counted once per
// concurrent writer, a few dozen queues would use the whole bound, and every later write to
// any further queue would pay a ZADD round trip.
func TestRegistryMemoCountsNamesOnce(t *testing.T) {
	t.Parallel()
	b, err := New(valkeytest.Shared(t).Client(t), Config{})
	require.NoError(t, err)
	var r [6]byte
	_, _ = rand.Read(r[:])
	ctx := context.Background()
	const names, writers = 4, 32
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range names {
		name := "registrymemo." + hex.EncodeToString(r[:]) + "." + string(rune('a'+i))
		for range writers {
			wg.Go(func() {
				<-start
				require.NoError(t, b.list(ctx, name))
			})
		}
	}
	close(start)
	wg.Wait()
	require.EqualValues(t, names, b.reg.size.Load(), "each name counts once toward maxCachedQueues")
}
