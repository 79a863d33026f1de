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
	}{
		{"one value", []float64{5}, 5, 0, 5, 5},
		{"odd count, unsorted", []float64{110, 90, 100, 105, 95}, 100, 0.10, 90, 110},
		{"even count: mean of the middle two", []float64{4, 1, 3, 2}, 2.5, 0.6, 1, 4},
		{"one outlier sets the spread", []float64{100, 100, 100, 100, 150}, 100, 0.5, 100, 150},
		{"low outlier too", []float64{100, 100, 100, 100, 70}, 100, 0.3, 70, 100},
		{"all equal", []float64{7, 7, 7, 7, 7}, 7, 0, 7, 7},
		{"zero median, no deviation", []float64{0, 0, 0}, 0, 0, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := append([]float64(nil), tc.in...)
			s := summarize(tc.in)
			require.Equal(t, in, tc.in, "summarize must not reorder its input")
			require.Equal(t, len(tc.in), s.n)
			require.InDelta(t, tc.median, s.median, 1e-9)
			require.InDelta(t, tc.spread, s.spread, 1e-9)
			require.Equal(t, tc.min, s.min)
			require.Equal(t, tc.max, s.max)
		})
	}
	t.Run("zero median with deviation is infinitely noisy", func(t *testing.T) {
		t.Parallel()
		require.True(t, math.IsInf(summarize([]float64{0, 0, 1}).spread, 1))
	})
}

func TestDivide(t *testing.T) {
	t.Parallel()
	t.Run("paired round by round", func(t *testing.T) {
		t.Parallel()
		// The machine slows down in round 3 for both sides: the paired
		// quotient stays exact while each side alone spreads by 50%.
		a := []float64{200, 200, 300, 200, 200}
		b := []float64{100, 100, 150, 100, 100}
		require.InDelta(t, 0.5, summarize(a).spread, 1e-9)
		q, paired := divide(a, b, true)
		require.True(t, paired)
		require.InDelta(t, 2, q.median, 1e-9)
		require.InDelta(t, 0, q.spread, 1e-9)
		require.Equal(t, 5, q.n)
	})
	t.Run("different counts: ratio of medians, spreads add", func(t *testing.T) {
		t.Parallel()
		a := []float64{90, 100, 110}     // median 100, spread 10%
		b := []float64{50, 50, 50, 55.0} // median 50, spread 10%
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
