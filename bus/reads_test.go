package bus_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/lua"
)

// TestCountsMany: the counts of several queues in one pipeline equal each queue's Counts; a bad
// name is refused before anything is sent; the pipelined runs decode like the verbs.
func TestCountsMany(t *testing.T) {
	t.Parallel()
	client := valkeytest.Shared(t).Client(t)
	b := newBus(t, client, bus.Config{})
	ctx := context.Background()
	base := fresh(t)
	names := []string{base + ".a", base + ".b", base + ".c"}
	for i, name := range names {
		for j := 0; j <= i; j++ {
			_, err := b.Enqueue(ctx, name, []byte(fmt.Sprint(j)), nil)
			require.NoError(t, err)
		}
	}
	require.NoError(t, b.Pause(ctx, names[1]))

	got, err := b.CountsMany(ctx, names)
	require.NoError(t, err)
	require.Len(t, got, 3)
	for i, name := range names {
		want, err := b.Counts(ctx, name)
		require.NoError(t, err)
		require.Equal(t, want, got[i], name)
		require.Equal(t, int64(i+1), got[i].Pending, name)
	}
	require.True(t, got[1].Paused)

	_, err = b.CountsMany(ctx, []string{names[0], "bad name"})
	require.ErrorIs(t, err, bus.ErrInvalid)
	none, err := b.CountsMany(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, none)

	// The runs a tool pipelines itself, with a worker-stats read of an idle queue beside them.
	cr, err := bus.CountsRun(names[2])
	require.NoError(t, err)
	wr, err := bus.WorkerStatsRun(names[2])
	require.NoError(t, err)
	replies, _ := lua.Pipeline(ctx, client, []lua.Run{cr, wr}, nil)
	c, err := bus.DecodeCounts(names[2], replies[0])
	require.NoError(t, err)
	require.Equal(t, int64(3), c.Pending)
	fs, err := bus.DecodeWorkerStats(names[2], replies[1])
	require.NoError(t, err)
	require.Empty(t, fs.Workers)
	require.Equal(t, names[2], fs.Queue)
	require.False(t, fs.At.IsZero(), "the server's clock")

	// A reply of another script does not decode as counts.
	_, err = bus.DecodeCounts(names[2], replies[1])
	require.ErrorIs(t, err, bus.ErrProtocol)
	_, err = bus.CountsRun("a{b")
	require.ErrorIs(t, err, bus.ErrInvalid)
	_, err = bus.WorkerStatsRun("")
	require.ErrorIs(t, err, bus.ErrInvalid)
}
