package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStripProcs(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, in, want string }{
		{"top level", "BenchmarkX-2", "BenchmarkX"},
		{"many procs", "BenchmarkX-128", "BenchmarkX"},
		{"sub-benchmark", "BenchmarkX/c=20-2", "BenchmarkX/c=20"},
		{"dash inside the sub name", "BenchmarkX/raw-bytes-8", "BenchmarkX/raw-bytes"},
		{"GOMAXPROCS=1: no suffix", "BenchmarkX/raw-bytes", "BenchmarkX/raw-bytes"},
		{"no suffix at all", "BenchmarkX", "BenchmarkX"},
		{"dash before the last slash", "BenchmarkX-2/serial", "BenchmarkX-2/serial"},
		{"trailing dash", "BenchmarkX-", "BenchmarkX-"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, stripProcs(tc.in))
		})
	}
}

// sampleOutput is two rounds of two packages as bench/run.sh collects them,
// with the things real output contains: config lines, custom metrics, a
// failure and a skip with their messages, and noise.
const sampleOutput = `goos: linux
goarch: amd64
pkg: github.com/echocache/echocache/bench
cpu: AMD EPYC
BenchmarkRistrettoGet/serial-2         	 7000000	       150.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkPubSubRoundTrip-2             	    6000	    160000 ns/op	    150000 p50-ns	    400000 p99-ns	     246 B/op	       4 allocs/op
--- FAIL: BenchmarkBroken
    --- FAIL: BenchmarkBroken/sub-2
        baseline_test.go:42: server went away
--- SKIP: BenchmarkSkipped-2
    baseline_test.go:50: needs a cluster
BenchmarkInterrupted-2    	some log line that cut the result off
PASS
ok  	github.com/echocache/echocache/bench	12.3s
goos: linux
goarch: amd64
pkg: github.com/echocache/echocache/bench/peers
cpu: Something Else
BenchmarkAsynqJobs/c=20-2   	    5000	    240000 ns/op	      4100 jobs/s	    5900 B/op	      90 allocs/op
PASS
pkg: github.com/echocache/echocache/bench
BenchmarkRistrettoGet/serial-2         	 7000000	       160.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkPubSubRoundTrip-2             	    6000	    170000 ns/op	    155000 p50-ns	    420000 p99-ns	     250 B/op	       4 allocs/op
`

func parseString(t *testing.T, s string) *results {
	t.Helper()
	r := newResults()
	require.NoError(t, r.parse(strings.NewReader(s)))
	return r
}

func TestParse(t *testing.T) {
	t.Parallel()
	r := parseString(t, sampleOutput)

	rg := r.benches["BenchmarkRistrettoGet/serial"]
	require.NotNil(t, rg)
	require.Equal(t, []float64{150, 160}, rg.values["ns/op"])
	require.Equal(t, []float64{0, 0}, rg.values["allocs/op"])
	require.Equal(t, "github.com/echocache/echocache/bench", rg.pkg)

	ps := r.benches["BenchmarkPubSubRoundTrip"]
	require.Equal(t, []float64{150000, 155000}, ps.values["p50-ns"])
	require.Equal(t, []float64{400000, 420000}, ps.values["p99-ns"])

	jobs := r.benches["BenchmarkAsynqJobs/c=20"]
	require.Equal(t, []float64{4100}, jobs.values["jobs/s"])
	require.Equal(t, "github.com/echocache/echocache/bench/peers", jobs.pkg)

	require.Equal(t, 1, r.benches["BenchmarkBroken/sub"].fails)
	require.Equal(t, "baseline_test.go:42: server went away", r.benches["BenchmarkBroken/sub"].why)
	require.Equal(t, 1, r.benches["BenchmarkBroken"].fails)
	require.Equal(t, 1, r.benches["BenchmarkSkipped"].skips)
	require.Equal(t, "baseline_test.go:50: needs a cluster", r.benches["BenchmarkSkipped"].why)
	require.NotContains(t, r.benches, "BenchmarkInterrupted", "a line without numbers is not a result")

	require.Equal(t, "AMD EPYC", r.config["cpu"], "the first cpu line wins")
	require.Equal(t, []string{"github.com/echocache/echocache/bench", "github.com/echocache/echocache/bench/peers"}, r.pkgs)
}

func TestParseResult(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		line string
		ok   bool
		want map[string]float64
	}{
		{"plain", "BenchmarkA-2 \t 100 \t 12.5 ns/op", true, map[string]float64{"ns/op": 12.5}},
		{"with mem and metric", "BenchmarkA-2 100 12.5 ns/op 3 B/op 1 allocs/op 7 p50-ns", true,
			map[string]float64{"ns/op": 12.5, "B/op": 3, "allocs/op": 1, "p50-ns": 7}},
		{"name only", "BenchmarkA-2 \t", false, nil},
		{"odd fields", "BenchmarkA-2 100 12.5", false, nil},
		{"iterations not a number", "BenchmarkA-2 many 12.5 ns/op", false, nil},
		{"value not a number", "BenchmarkA-2 100 fast ns/op", false, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			name, vals, ok := parseResult(tc.line)
			require.Equal(t, tc.ok, ok)
			if ok {
				require.Equal(t, "BenchmarkA", name)
				require.Equal(t, tc.want, vals)
			}
		})
	}
}
