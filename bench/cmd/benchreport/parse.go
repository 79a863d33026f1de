package main

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// benchmark is every result line of one benchmark in the input.
type benchmark struct {
	name string // as printed, without the -GOMAXPROCS suffix
	pkg  string // the package it was printed under, if a pkg: line said
	// values holds, per unit, one value per result line in input order. With
	// `make bench` each result line is one round, so index i of two
	// benchmarks was measured in the same round, minutes apart at most.
	values map[string][]float64
	// fails and skips count the rounds that printed --- FAIL or --- SKIP;
	// why is the first message printed under the first of them.
	fails, skips int
	why          string
}

// results is everything parsed from `go test -bench` output.
type results struct {
	benches map[string]*benchmark
	config  map[string]string // goos, goarch, cpu: first value seen
	pkgs    []string          // every pkg: line, in order, without repeats
}

func newResults() *results {
	return &results{benches: map[string]*benchmark{}, config: map[string]string{}}
}

func (r *results) bench(name string) *benchmark {
	b := r.benches[name]
	if b == nil {
		b = &benchmark{name: name, values: map[string][]float64{}}
		r.benches[name] = b
	}
	return b
}

// parse reads `go test -bench` output (any number of runs and packages
// concatenated) into r. Lines it does not understand are ignored, as
// benchstat does: test binaries may print anything.
func (r *results) parse(in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	pkg := ""
	var pending *benchmark // a --- FAIL/SKIP whose message comes next
	pendingIndent := 0
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " \t")
		indent := len(line) - len(trimmed)
		if pending != nil {
			if indent > pendingIndent && trimmed != "" && !strings.HasPrefix(trimmed, "--- ") {
				if pending.why == "" {
					pending.why = trimmed
				}
				pending = nil
				continue
			}
			pending = nil
		}
		switch {
		case strings.HasPrefix(trimmed, "--- FAIL: Benchmark"), strings.HasPrefix(trimmed, "--- SKIP: Benchmark"):
			fields := strings.Fields(trimmed)
			b := r.bench(stripProcs(fields[2]))
			if fields[1] == "FAIL:" {
				b.fails++
			} else {
				b.skips++
			}
			pending, pendingIndent = b, indent
		case indent == 0 && strings.HasPrefix(line, "Benchmark"):
			name, vals, ok := parseResult(line)
			if !ok {
				continue // a name printed before output that interrupted it
			}
			b := r.bench(name)
			if b.pkg == "" {
				b.pkg = pkg
			}
			for unit, v := range vals {
				b.values[unit] = append(b.values[unit], v)
			}
		case indent == 0:
			key, val, ok := strings.Cut(line, ": ")
			if !ok || strings.ContainsAny(key, " \t") {
				continue
			}
			switch key {
			case "pkg":
				pkg = val
				if !contains(r.pkgs, val) {
					r.pkgs = append(r.pkgs, val)
				}
			case "goos", "goarch", "cpu":
				if _, seen := r.config[key]; !seen {
					r.config[key] = val
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading benchmark output: %w", err)
	}
	return nil
}

// parseResult parses one result line:
//
//	BenchmarkName-2   	 1000	  123.4 ns/op	  5 B/op	  0 allocs/op	  99 p50-ns
//
// It returns ok false for anything else.
func parseResult(line string) (name string, vals map[string]float64, ok bool) {
	f := strings.Fields(line)
	if len(f) < 4 || len(f)%2 != 0 {
		return "", nil, false
	}
	if _, err := strconv.ParseInt(f[1], 10, 64); err != nil {
		return "", nil, false
	}
	vals = make(map[string]float64, (len(f)-2)/2)
	for i := 2; i < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return "", nil, false
		}
		vals[f[i+1]] = v
	}
	return stripProcs(f[0]), vals, true
}

// stripProcs removes the -GOMAXPROCS suffix that go test appends to a
// benchmark's name (omitted when GOMAXPROCS is 1).
func stripProcs(name string) string {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 || i == len(name)-1 || strings.LastIndexByte(name, '/') > i {
		return name
	}
	for _, c := range name[i+1:] {
		if c < '0' || c > '9' {
			return name
		}
	}
	return name[:i]
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
