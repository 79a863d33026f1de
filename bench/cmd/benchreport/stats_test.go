package main

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSummarize(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name           string
		in             []float64
		median, spread float64
		min, max       float64
		outliers       int
	}{
		{"one value", []float64{5}, 5, 0, 5, 5, 0},
		{"odd count, unsorted", []float64{110, 90, 100, 105, 95}, 100, 0.10, 90, 110, 0},
		{"even count: mean of the middle two", []float64{4, 1, 3, 2}, 2.5, 0.6, 1, 4, 0},
		// Sorted 98 98 99 100 101 102 102 x: the fences sit a few units
		// beyond the quartiles unless x drags q3.
		{"a slow round beyond the fences is dropped", []float64{98, 100, 102, 99, 101, 98, 102, 150}, 100, 0.02, 98, 102, 1},
		{"a fast one too", []float64{98, 100, 102, 99, 101, 98, 102, 60}, 100, 0.02, 98, 102, 1},
		{"a round just inside the fences stays", []float64{98, 100, 102, 99, 101, 98, 102, 106}, 100.5, 0.0547, 98, 106, 0},
		{"no spread at all: every other value is an outlier", []float64{100, 100, 100, 100, 101}, 100, 0, 100, 100, 1},
		{"three rounds: nothing dropped", []float64{100, 100, 300}, 100, 2, 100, 300, 0},
		{"all equal", []float64{7, 7, 7, 7, 7}, 7, 0, 7, 7, 0},
		{"zero median, no deviation", []float64{0, 0, 0}, 0, 0, 0, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := append([]float64(nil), tc.in...)
			s := summarize(tc.in)
			require.Equal(t, in, tc.in, "summarize must not reorder its input")
			require.Equal(t, len(tc.in)-tc.outliers, s.n)
			require.Equal(t, tc.outliers, s.outliers)
			require.InDelta(t, tc.median, s.median, 1e-9)
			require.InDelta(t, tc.spread, s.spread, 1e-4)
			require.Equal(t, tc.min, s.min)
			require.Equal(t, tc.max, s.max)
		})
	}
	t.Run("zero median with deviation is infinitely noisy", func(t *testing.T) {
		t.Parallel()
		require.True(t, math.IsInf(summarize([]float64{0, 0, 1}).spread, 1))
	})
}

func TestQuantile(t *testing.T) {
	t.Parallel()
	s := []float64{1, 2, 3, 4}
	require.InDelta(t, 1.75, quantile(s, 0.25), 1e-9)
	require.InDelta(t, 2.5, quantile(s, 0.5), 1e-9)
	require.InDelta(t, 3.25, quantile(s, 0.75), 1e-9)
	require.InDelta(t, 4, quantile(s, 1), 1e-9)
	require.InDelta(t, 1, quantile(s, 0), 1e-9)
	require.InDelta(t, 9, quantile([]float64{9}, 0.5), 1e-9)
}

func TestDivide(t *testing.T) {
	t.Parallel()
	t.Run("paired round by round", func(t *testing.T) {
		t.Parallel()
		// The machine slows down in rounds 3 and 4 for both sides: the
		// paired quotient stays exact while each side alone spreads by 25%.
		a := []float64{200, 200, 250, 250, 200}
		b := []float64{100, 100, 125, 125, 100}
		require.InDelta(t, 0.25, summarize(a).spread, 1e-9)
		q, paired := divide(a, b, true)
		require.True(t, paired)
		require.InDelta(t, 2, q.median, 1e-9)
		require.InDelta(t, 0, q.spread, 1e-9)
		require.Equal(t, 5, q.n)
	})
	t.Run("different counts: ratio of medians, spreads add", func(t *testing.T) {
		t.Parallel()
		a := []float64{90, 100, 110}   // median 100, spread 10%
		b := []float64{45, 50, 50, 55} // median 50, spread 10%
		q, paired := divide(a, b, true)
		require.False(t, paired)
		require.InDelta(t, 2, q.median, 1e-9)
		require.InDelta(t, 0.2, q.spread, 1e-9)
		require.Equal(t, 3, q.n)
	})
	t.Run("same counts but not pairable", func(t *testing.T) {
		t.Parallel()
		q, paired := divide([]float64{10, 20}, []float64{5, 5}, false)
		require.False(t, paired)
		require.InDelta(t, 3, q.median, 1e-9) // 15 / 5
	})
}
