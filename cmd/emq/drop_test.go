package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
)

// TestDrop: emq drop asks first (refused without a terminal or --yes), refuses a queue with a
// claimed job unless --force (exit 5), then deletes the queue: it leaves the registry, and a
// second drop finds no queue (exit 3).
func TestDrop(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Shared(t)
	ctx := context.Background()
	b, err := bus.New(srv.Client(t), bus.Config{})
	require.NoError(t, err)
	queue := valkeytest.TestName(t)
	_, err = b.EnqueueBatch(ctx, queue, make([]bus.NewJob, 5), nil)
	require.NoError(t, err)
	_, err = b.Claim(ctx, queue, nil)
	require.NoError(t, err)

	r := emq(t, srv.Addr, "drop", queue)
	require.Equal(t, exitRefused, r.code, r.err)
	require.Contains(t, r.err, "drop queue "+queue+" and its 5 jobs (4 pending, 1 active, 0 scheduled, 0 dead)")
	r = emq(t, srv.Addr, "drop", queue, "--yes")
	require.Equal(t, exitRefused, r.code, r.err)
	require.Contains(t, r.err, "1 jobs are claimed")
	c, err := b.Counts(ctx, queue)
	require.NoError(t, err)
	require.EqualValues(t, 4, c.Pending, "a refused drop deletes nothing")

	var ch changed
	okJSON(t, srv.Addr, &ch, "drop", queue, "--yes", "--force")
	require.Equal(t, changed{Queue: queue, Action: "dropped", Count: 8}, ch, "5 rows, pending, active and wake")
	var rows []queueRow
	okJSON(t, srv.Addr, &rows, "queues")
	for _, row := range rows {
		require.NotEqual(t, queue, row.Name)
	}
	require.Equal(t, exitNotFound, emq(t, srv.Addr, "drop", queue, "--yes").code)
}
