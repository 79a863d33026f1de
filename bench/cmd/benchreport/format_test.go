package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFormat(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		v          float64
		unit, want string
	}{
		{"ns", 762, "ns/op", "762 ns"},
		{"small ns", 12.345, "ns/op", "12.3 ns"},
		{"µs", 31000, "ns/op", "31.0 µs"},
		{"µs from a metric", 151282, "p50-ns", "151 µs"},
		{"ms", 1234567, "p99-ns", "1.23 ms"},
		{"s", 2.5e9, "ns/op", "2.50 s"},
		{"factor", 40, "×", "40.0×"},
		{"small factor", 0.0123, "×", "0.0123×"},
		{"big factor", 977.4, "×", "977×"},
		{"jobs", 12345.6, "jobs/s", "12,346 jobs/s"},
		{"small jobs", 999, "jobs/s", "999 jobs/s"},
		{"other unit", 3, "B/op", "3.00 B/op"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, fmtValue(tc.v, tc.unit))
		})
	}
}

func TestPct(t *testing.T) {
	t.Parallel()
	require.Equal(t, "2.1%", pct(0.021))
	require.Equal(t, "0.0%", pct(0))
	require.Equal(t, "10%", pct(0.1))
	require.Equal(t, "250%", pct(2.5))
}

func TestDecadeLabel(t *testing.T) {
	t.Parallel()
	want := map[int]string{0: "1 ns", 1: "10 ns", 2: "100 ns", 3: "1 µs", 5: "100 µs", 6: "1 ms", 9: "1 s", 10: "10 s"}
	for d, w := range want {
		require.Equal(t, w, decadeLabel(d), "decade %d", d)
	}
}
