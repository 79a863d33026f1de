package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// TestClusterQueues: on the loopback cluster, queues whose hash tags live on each of the
// primaries are all listed by emq queues with their counts, from the seeds or --cluster.
func TestClusterQueues(t *testing.T) {
	t.Parallel()
	cl := valkeytest.SharedCluster(t)
	b, err := bus.New(cl.Client(t), bus.Config{})
	require.NoError(t, err)
	ctx := context.Background()

	// One queue per primary: names tried until each primary owns one's slot.
	base := valkeytest.TestName(t)
	want := map[string]int{} // queue -> jobs enqueued
	for _, p := range cl.Primaries() {
		for i := 0; ; i++ {
			name := fmt.Sprintf("%s-%d", base, i)
			if _, taken := want[name]; taken || cl.PrimaryForSlot(keys.Slot("{"+name+"}")) != p {
				continue
			}
			want[name] = len(want) + 1
			for range want[name] {
				_, err := b.Enqueue(ctx, name, []byte("x"), nil)
				require.NoError(t, err)
			}
			break
		}
	}
	require.Len(t, want, len(cl.Primaries()))

	seeds := strings.Join(cl.Addrs(), ",")
	for _, extra := range [][]string{nil, {"--cluster"}} {
		var rows []queueRow
		okJSON(t, seeds, &rows, append([]string{"queues"}, extra...)...)
		got := map[string]int{}
		for _, r := range rows {
			if _, ok := want[r.Name]; ok {
				got[r.Name] = int(r.Pending)
			}
		}
		require.Equal(t, want, got)
	}
	// One seed is enough to find the cluster.
	var rows []queueRow
	okJSON(t, cl.Addrs()[0], &rows, "queues", "--cluster")
	n := 0
	for _, r := range rows {
		if _, ok := want[r.Name]; ok {
			n++
		}
	}
	require.Equal(t, len(want), n)
}
