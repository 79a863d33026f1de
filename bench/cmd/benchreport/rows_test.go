package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRowsAreConsistent checks the mapping itself: a typo in a benchmark
// name would silently turn a row into "not measured" forever.
func TestRowsAreConsistent(t *testing.T) {
	t.Parallel()
	defined := benchmarkFuncs(t, filepath.Join("..", ".."), filepath.Join("..", "..", "peers"))
	for name := range nodeBenchmarks(t, filepath.Join("..", "..", "peers", "bullmq")) {
		defined[name] = true
	}
	for _, name := range []string{baseCmpAA, baseCmpTierGap, peerCmpGoRedis, peerCmpAsynq, peerCmpCSC} {
		require.True(t, defined[name], "%s is not defined", name)
	}

	ids := map[string]bool{}
	used := map[string]bool{}
	for _, rw := range rows {
		require.NotEmpty(t, rw.id)
		require.False(t, ids[rw.id], "duplicate row id %s", rw.id)
		ids[rw.id] = true
		require.NotEmpty(t, rw.name, rw.id)
		require.NotEmpty(t, rw.section, rw.id)
		if rw.guard {
			require.True(t, isOurs(rw.subject.num.bench), "%s: only rows about our code are guarded", rw.id)
			require.NotEqual(t, neither, rw.better, "%s: a guarded row needs a direction", rw.id)
		}
		if rw.other != nil && rw.subject.den == nil && rw.other.den == nil {
			require.Equal(t, isTime(rw.subject.unit()), isTime(rw.other.unit()), "%s divides a time by a non-time", rw.id)
		}
		ms := []measure{rw.subject}
		if rw.other != nil {
			ms = append(ms, *rw.other)
		}
		if rw.paired != nil {
			require.NotNil(t, rw.other, "%s: an interleaved ratio needs a compared side", rw.id)
			ms = append(ms, measure{num: *rw.paired})
		}
		for _, m := range ms {
			for _, name := range m.benches() {
				used[name] = true
				require.Equal(t, name, stripProcs(name), "%s: %s ends like a -GOMAXPROCS suffix", rw.id, name)
				if isOurs(name) {
					continue
				}
				top, _, _ := strings.Cut(name, "/")
				require.True(t, defined[top], "%s: no func %s in bench/ or bench/peers", rw.id, top)
			}
		}
	}
	for _, e := range expectedOurs {
		require.True(t, used[e.name], "expected benchmark %s is used by no row", e.name)
		require.NotEmpty(t, e.what, e.name)
		require.Contains(t, []string{core, peersMod}, e.where, e.name)
	}
	for _, cb := range chartBars {
		unit := cb.m.unit()
		require.True(t, isTime(unit) || cb.perJob && unit == unitJobs, "chart bar %q: unit %s cannot be drawn as time", cb.label, unit)
		require.Contains(t, groupColor, cb.group)
	}
}

// benchmarkFuncs returns the names of the Benchmark functions defined in the
// _test.go files of dirs.
func benchmarkFuncs(t *testing.T, dirs ...string) map[string]bool {
	t.Helper()
	re := regexp.MustCompile(`(?m)^func (Benchmark\w+)\(b \*testing\.B\)`)
	out := map[string]bool{}
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
		require.NoError(t, err)
		require.NotEmpty(t, files, dir)
		for _, f := range files {
			src, err := os.ReadFile(f)
			require.NoError(t, err)
			for _, m := range re.FindAllStringSubmatch(string(src), -1) {
				out[m[1]] = true
			}
		}
	}
	return out
}

// nodeBenchmarks returns the benchmark names the Node peers' scripts in dir print: the
// `Benchmark...` at the head of a template literal, up to its first "/".
func nodeBenchmarks(t *testing.T, dir string) map[string]bool {
	t.Helper()
	re := regexp.MustCompile("`(Benchmark\\w+)/")
	files, err := filepath.Glob(filepath.Join(dir, "*.mjs"))
	require.NoError(t, err)
	require.NotEmpty(t, files, dir)
	out := map[string]bool{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range re.FindAllStringSubmatch(string(src), -1) {
			out[m[1]] = true
		}
	}
	require.NotEmpty(t, out, "no benchmark name in %s", dir)
	return out
}
