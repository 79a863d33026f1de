package main

import (
	"bytes"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// realisticOutput has every baseline and peer benchmark the rows name, five
// rounds each, and none of ours: the state of the repository today.
func realisticOutput() string {
	var b strings.Builder
	b.WriteString("goos: linux\ngoarch: amd64\npkg: github.com/echocache/echocache/bench\ncpu: Test CPU\n")
	seen := map[string]bool{}
	for _, rw := range rows {
		ms := []measure{rw.subject}
		if rw.other != nil {
			ms = append(ms, *rw.other)
		}
		if rw.paired != nil {
			ms = append(ms, measure{num: *rw.paired})
		}
		for _, m := range ms {
			for _, name := range m.benches() {
				if isOurs(name) || seen[name] {
					continue
				}
				seen[name] = true
				for round := range 5 {
					v := 1000.0 + float64(round)
					b.WriteString(name + "-2 \t 1000 \t ")
					b.WriteString(strings.TrimSpace(fmtFloat(v)) + " ns/op \t 9 p50-ns \t 20 p99-ns \t 4000 jobs/s \t 1 a-ns/op \t 1 b-ns/op \t 1.5 ratio \t 1.1 p50-ratio \t 1.2 p99-ratio \t 0 B/op \t 0 allocs/op\n")
				}
			}
		}
	}
	return b.String()
}

func fmtFloat(v float64) string { return strings.TrimRight(strings.TrimRight(sig3(v), "0"), ".") }

func TestRunWritesReportChartAndBaseline(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := filepath.Join(dir, "raw.txt")
	require.NoError(t, os.WriteFile(in, []byte(realisticOutput()), 0o644))
	md, svg, js := filepath.Join(dir, "REPORT.md"), filepath.Join(dir, "chart.svg"), filepath.Join(dir, "baseline.json")

	var stdout, stderr bytes.Buffer
	err := run([]string{"-md", md, "-svg", svg, "-json", js, "-env", "command=make bench", in}, nil, &stdout, &stderr)
	require.NoError(t, err, stderr.String())

	table := stdout.String()
	require.Equal(t, len(rows)+3, strings.Count(table, "\n")-2, "one line per row and per section, after the header")
	require.Contains(t, table, "*not measured: BenchmarkCacheL1Hit/serial absent*")
	require.NotContains(t, table, "NaN")
	require.NotContains(t, table, "Inf")

	report, err := os.ReadFile(md)
	require.NoError(t, err)
	require.Contains(t, string(report), table, "the report carries the printed table")
	require.Contains(t, string(report), "- command: make bench")
	require.Contains(t, string(report), "![tiers and peers, log scale](chart.svg)")
	for _, e := range expectedOurs {
		require.Contains(t, string(report), "- `"+e.name+"` (in `"+e.where+"`): ", "the report lists what is not measured yet")
	}

	chart, err := os.ReadFile(svg)
	require.NoError(t, err)
	requireWellFormedXML(t, chart)
	require.Equal(t, len(chartBars), strings.Count(string(chart), "not measured")+strings.Count(string(chart), "<rect x=\"310\""),
		"every bar is drawn or says not measured")

	// The baseline just written passes its own check.
	stdout.Reset()
	require.NoError(t, run([]string{"-check", js, in}, nil, &stdout, &stderr))
}

func TestRunCheckFailsOnRegression(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	base := lines("BenchmarkCacheL1Hit/serial", "ns/op", 150, 150, 150, 150, 150) +
		lines("BenchmarkRistrettoGet/serial", "ns/op", 100, 100, 100, 100, 100)
	slow := lines("BenchmarkCacheL1Hit/serial", "ns/op", 200, 200, 200, 200, 200) +
		lines("BenchmarkRistrettoGet/serial", "ns/op", 100, 100, 100, 100, 100)
	baseIn, slowIn := filepath.Join(dir, "base.txt"), filepath.Join(dir, "slow.txt")
	require.NoError(t, os.WriteFile(baseIn, []byte(base), 0o644))
	require.NoError(t, os.WriteFile(slowIn, []byte(slow), 0o644))
	js := filepath.Join(dir, "baseline.json")
	require.NoError(t, run([]string{"-json", js, baseIn}, nil, io.Discard, io.Discard))

	var out bytes.Buffer
	err := run([]string{"-check", js, slowIn}, nil, &out, io.Discard)
	require.ErrorIs(t, err, errRegressed)
	require.Regexp(t, regexp.MustCompile(`L1 hit, serial.*\| 1.50× \| 2.00× \| 33% worse \| 20% worse \| REGRESSED \|`), out.String())

	// A looser tolerance lets the same change through.
	require.NoError(t, run([]string{"-check", js, "-tolerance", "0.5", slowIn}, nil, io.Discard, io.Discard))
}

func TestRunRejectsBadInput(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		args  []string
		stdin string
		err   string
	}{
		{"empty input", nil, "PASS\n", "no benchmark results"},
		{"negative tolerance", []string{"-tolerance", "-1"}, "", "must be at least 0"},
		{"bad env", []string{"-env", "novalue"}, "", "key=value"},
		{"missing file", []string{filepath.Join(t.TempDir(), "nope.txt")}, "", "no such file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var stderr bytes.Buffer
			err := run(tc.args, strings.NewReader(tc.stdin), io.Discard, &stderr)
			require.Error(t, err)
			require.Contains(t, err.Error()+stderr.String(), tc.err)
		})
	}
}

func requireWellFormedXML(t *testing.T, b []byte) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	for {
		_, err := d.Token()
		if err == io.EOF {
			return
		}
		require.NoError(t, err)
	}
}
