package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
)

func TestMain(m *testing.M) { valkeytest.Main(m) }

// TestDrain: every configuration's drain retires every job it enqueued, through the scripts
// the worker runs, and leaves the queue empty; without -pid the tool says so and counts
// nothing.
func TestDrain(t *testing.T) {
	srv := valkeytest.Shared(t)
	c := srv.Client(t)
	ctx := context.Background()
	b, err := bus.New(c, bus.Config{})
	require.NoError(t, err)
	for _, cfg := range configs {
		q, err := fill(ctx, c, cfg, 250)
		require.NoError(t, err, cfg.name)
		n, err := drain(ctx, c, q, cfg.lanes > 0, 7)
		require.NoError(t, err, cfg.name)
		require.Equal(t, 250, n, cfg.name)
		counts, err := b.Counts(ctx, q.Name())
		require.NoError(t, err, cfg.name)
		require.Zero(t, counts.Pending+counts.Active+counts.Scheduled+counts.Dead, cfg.name)
	}
	var out bytes.Buffer
	require.NoError(t, run([]string{"-addr", srv.Addr, "-jobs", "40", "-per", "5"}, &out))
	require.Equal(t, "plain: drained 40 jobs\nlanes: drained 40 jobs\nlanes+cap: drained 40 jobs\nlanes+rate: drained 40 jobs\n", out.String())
	require.Error(t, run([]string{"-addr", srv.Addr, "-per", "0"}, &out))
}

// TestReadTotal reads the summary line of a callgrind dump.
func TestReadTotal(t *testing.T) {
	dump := "# callgrind format\nversion: 1\ncreator: callgrind-3.19.0\nevents: Ir\nsummary: 238962028\ntotals: 241535441\n"
	n, err := readTotal(strings.NewReader(dump))
	require.NoError(t, err)
	require.EqualValues(t, 238962028, n)
	_, err = readTotal(strings.NewReader("events: Ir\n"))
	require.Error(t, err)
	require.Equal(t, 12, dumpIndex("/tmp/x/cg.42.out.12"))
}
