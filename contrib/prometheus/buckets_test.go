package echoprom_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/cache"
	echoprom "github.com/echocache/echocache/contrib/prometheus"
	"github.com/echocache/echocache/echotest"
	"github.com/echocache/echocache/tables"
)

// TestPropagationBucketsUnsorted: PropagationBuckets given out of order still count each
// delay in the buckets whose bound it is under (client_golang's own histograms refuse such
// bounds; the collector's const histogram would take them and export decreasing counts).
func TestPropagationBucketsUnsorted(t *testing.T) {
	t.Parallel()
	srv := echotest.Valkey(t)
	ctx := context.Background()
	table := echotest.Name(t) + ".t"
	c, err := cache.New(srv.Client(t), cache.Config{StatsInterval: 50 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	tbl, err := cache.NewTable(c, tables.Spec{Name: table, TTL: time.Minute},
		func(_ context.Context, id int64) (int64, error) { return id, nil }, nil)
	require.NoError(t, err)
	require.NoError(t, tbl.Set(ctx, 1, 1))
	eventually(t, "the table's published stats show the invalidation", func() bool {
		fs, err := cache.ReadStats(ctx, srv.Client(t), table)
		return err == nil && fs.Total.PropagationCount == 1
	})

	// One delay, under 100 s and over 1 ns.
	reg := prometheus.NewRegistry()
	reg.MustRegister(echoprom.NewCollector(srv.Bus(t, nil), &echoprom.CollectorOpts{Queues: []string{},
		Tables: []string{table}, PropagationBuckets: []float64{100, 1e-9}}))
	fams, err := reg.Gather()
	require.NoError(t, err)
	got := map[float64]uint64{}
	for _, f := range fams {
		if f.GetName() == "echocache_table_propagation_seconds" {
			require.Len(t, f.GetMetric(), 1)
			for _, b := range f.GetMetric()[0].GetHistogram().GetBucket() {
				got[b.GetUpperBound()] = b.GetCumulativeCount()
			}
		}
	}
	require.Equal(t, map[float64]uint64{1e-9: 0, 100: 1}, got)
}
