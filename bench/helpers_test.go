package bench

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/keys"
)

func TestLatenciesPercentile(t *testing.T) {
	t.Parallel()
	var l Latencies
	require.Zero(t, l.Percentile(50), "nothing recorded")
	for i := 100; i >= 1; i-- { // recorded out of order
		l.Add(time.Duration(i) * time.Microsecond)
	}
	cases := []struct {
		name string
		p    float64
		want time.Duration
	}{
		{"p50", 50, 50 * time.Microsecond},
		{"p99", 99, 99 * time.Microsecond},
		{"p100", 100, 100 * time.Microsecond},
		{"p1", 1, 1 * time.Microsecond},
		{"p0.5 rounds up to the first", 0.5, 1 * time.Microsecond},
		{"p99.5 rounds up", 99.5, 100 * time.Microsecond},
	}
	for _, tc := range cases {
		// Not parallel: l changes below, after the cases.
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, l.Percentile(tc.p))
		})
	}
	require.Equal(t, 100, l.Len())

	var other Latencies
	other.Add(time.Second)
	l.Merge(&other)
	require.Equal(t, time.Second, l.Percentile(100))
	l.Reset()
	require.Zero(t, l.Len())
}

func TestNearestRank(t *testing.T) {
	t.Parallel()
	require.Equal(t, 0, nearestRank(1, 99))
	require.Equal(t, 4, nearestRank(10, 50))
	require.Equal(t, 9, nearestRank(10, 99))
	require.Equal(t, 0, nearestRank(10, 0))
}

func TestUniqueName(t *testing.T) {
	t.Parallel()
	valid := regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
	long := "BenchmarkAsynqJobs/c=20/" + strings.Repeat("x", 100)
	seen := map[string]bool{}
	for _, in := range []string{"BenchmarkValkeyGet", "BenchmarkAsynqJobs/c=20", long, long} {
		n := UniqueName(in)
		require.Regexp(t, valid, n)
		require.NoError(t, keys.ValidateName(n), "usable as a table or queue name")
		require.False(t, seen[n], "names repeat: %s", n)
		seen[n] = true
	}
	require.True(t, strings.HasPrefix(UniqueName("BenchmarkAsynqJobs/c=20"), "BenchmarkAsynqJobs_c_20_"))
}

func TestSampleRow(t *testing.T) {
	t.Parallel()
	require.Equal(t, SampleRow(7), SampleRow(7))
	require.NotEqual(t, SampleRow(7), SampleRow(8))
	var back Row
	require.NoError(t, json.Unmarshal(SampleRowJSON(42), &back))
	require.Equal(t, SampleRow(42), back)
	require.InDelta(t, 100, len(SampleRowJSON(42)), 30, "a small row, about 100 bytes")
}

func TestCompareReportsBothSidesAndTheRatio(t *testing.T) {
	t.Parallel()
	// Side a spins twice as long as base: the ratio is about 2 however
	// loaded the machine is, since the blocks alternate.
	spin := func(d time.Duration) func(*testing.B) {
		return func(*testing.B) {
			for start := time.Now(); time.Since(start) < d; {
			}
		}
	}
	res := testing.Benchmark(func(b *testing.B) {
		Compare(b, Side{"slow", spin(20 * time.Microsecond)}, Side{"fast", spin(10 * time.Microsecond)})
	})
	require.Positive(t, res.N)
	require.Contains(t, res.Extra, "slow-ns/op")
	require.Contains(t, res.Extra, "fast-ns/op")
	require.InDelta(t, 2, res.Extra[UnitRatio], 0.5)
	require.Greater(t, res.Extra["slow-ns/op"], res.Extra["fast-ns/op"])
}

func TestBlockSize(t *testing.T) {
	t.Parallel()
	noop := Side{"noop", func(*testing.B) {}}
	b := &testing.B{}
	slow := Side{"slow", func(*testing.B) { time.Sleep(2 * time.Millisecond) }}
	require.Equal(t, 1, blockSize(b, slow), "an operation slower than the target gets blocks of one")
	n := blockSize(b, noop)
	require.Greater(t, n, 10, "a fast one gets blocks of its own size, not the slow side's")
	require.LessOrEqual(t, n, maxBlockOps)
}

func TestCompareLatencyReportsPercentilesAndRatios(t *testing.T) {
	t.Parallel()
	// Each side reports a synthetic span (1 in 50 ops slow), so the
	// percentiles and their ratios are exact; the spin only bounds b.N.
	side := func(name string, fast, slow time.Duration) LatencySide {
		i := 0
		return LatencySide{Name: name, Op: func(*testing.B) time.Duration {
			for start := time.Now(); time.Since(start) < 5*time.Microsecond; {
			}
			i++
			if i%50 == 0 {
				return slow
			}
			return fast
		}}
	}
	res := testing.Benchmark(func(b *testing.B) {
		CompareLatency(b, side("ours", 300*time.Microsecond, 3*time.Millisecond), side("raw", 100*time.Microsecond, time.Millisecond))
	})
	require.Positive(t, res.N)
	require.Equal(t, 300e3, res.Extra["ours-p50-ns"])
	require.Equal(t, 100e3, res.Extra["raw-p50-ns"])
	require.InDelta(t, 3, res.Extra[UnitP50Ratio], 1e-9)
	if res.N >= 50 { // 2% of the ops are slow: the p99 is slow once there are some
		require.Equal(t, 3e6, res.Extra["ours-p99-ns"])
		require.InDelta(t, 3, res.Extra[UnitP99Ratio], 1e-9)
	}
}
