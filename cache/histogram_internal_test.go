package cache

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestHistogramBuckets: every duration falls in the bucket whose range holds it, buckets
// are contiguous and at most 1/8 of their floor wide, and the quantiles of a recorded sample
// are within a bucket of the exact ones.
func TestHistogramBuckets(t *testing.T) {
	t.Parallel()
	prev := time.Duration(-1)
	for i := 0; i < histBuckets-1; i++ {
		top := bucketTop(i)
		require.Greater(t, top, prev, "bucket %d", i)
		require.Equal(t, i, bucketOf(top), "the top of bucket %d is in it", i)
		require.Equal(t, i, bucketOf(prev+1), "the floor of bucket %d is in it", i)
		if prev >= 64 {
			require.LessOrEqual(t, float64(top-prev), float64(prev)/8+1, "bucket %d is narrow", i)
		}
		prev = top
	}
	require.Equal(t, histBuckets-1, bucketOf(time.Hour))
	require.Equal(t, 0, bucketOf(-time.Second))

	var h latencies
	r := rand.New(rand.NewPCG(1, 2))
	sample := make([]time.Duration, 10_000)
	for i := range sample {
		sample[i] = time.Duration(r.ExpFloat64() * float64(300*time.Microsecond))
		h.record(sample[i])
	}
	slices.Sort(sample)
	var counts [histBuckets]int64
	h.addTo(&counts)
	for _, q := range []float64{0.5, 0.9, 0.99} {
		exact := sample[int(q*float64(len(sample)))-1]
		got := quantile(&counts, q)
		require.GreaterOrEqual(t, got, exact, "q %v", q)
		require.LessOrEqual(t, float64(got), float64(exact)*1.13, "q %v: %v vs %v", q, got, exact)
	}
	var n int64
	for _, b := range histogramOf(&counts) {
		n += b.Count
	}
	require.Equal(t, int64(len(sample)), n)
	var empty [histBuckets]int64
	require.Zero(t, quantile(&empty, 0.99))
}
