// Command benchreport turns `go test -bench` output of the core module's
// bench/ package and of the nested module bench/peers into EchoCache's
// benchmark report: one markdown table in which every figure of ours is a
// ratio to a baseline or a peer measured in the same run, summarized the way
// benchstat does (median and spread over the rounds), plus an SVG chart and
// a machine-readable baseline that `make bench-check` compares against.
//
// It has no dependencies beyond the standard library and the bench
// package's constants. Usage (bench/run.sh is the usual caller):
//
//	benchreport [-md REPORT.md] [-svg chart.svg] [-json baseline.json]
//	            [-check baseline.json [-tolerance 0.2] [-guard-all]]
//	            [-env key=value]... [file ...]
//
// With no file it reads standard input. It always prints the table to
// standard output. With -check it also prints the comparison and exits 1
// when a guarded ratio is worse than the baseline's by more than the
// tolerance, or is no longer measured.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// defaultTolerance is how much worse (as a fraction) a guarded ratio may get
// before bench-check fails. Ratios within one run are paired round by round,
// which removes most of the machine's noise; 20% is what is left on a busy
// 2-core machine with some margin.
const defaultTolerance = 0.20

// envFlags collects repeated -env key=value flags in order.
type envFlags [][2]string

func (e *envFlags) String() string { return fmt.Sprint(*e) }

func (e *envFlags) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return errors.New("want key=value")
	}
	*e = append(*e, [2]string{k, v})
	return nil
}

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, errRegressed) {
			fmt.Fprintln(os.Stderr, "benchreport:", err)
		}
		os.Exit(1)
	}
}

// errRegressed is returned when -check finds a regression; the verdicts
// have been printed already.
var errRegressed = errors.New("a guarded ratio regressed")

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("benchreport", flag.ContinueOnError)
	fs.SetOutput(stderr)
	md := fs.String("md", "", "write the full report (markdown) to this file")
	svg := fs.String("svg", "", "write the chart (SVG) to this file")
	js := fs.String("json", "", "write the machine-readable baseline to this file")
	checkFile := fs.String("check", "", "compare with this baseline.json and fail on regressions")
	tolerance := fs.Float64("tolerance", defaultTolerance, "with -check: how much worse a ratio may get, as a fraction")
	guardAll := fs.Bool("guard-all", false, "with -check: compare every row with a direction, not only rows of ours")
	var env envFlags
	fs.Var(&env, "env", "key=value describing the run, repeatable; printed in the report")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *tolerance < 0 {
		return fmt.Errorf("-tolerance %v: must be at least 0", *tolerance)
	}

	res := newResults()
	if fs.NArg() == 0 {
		if err := res.parse(stdin); err != nil {
			return err
		}
	}
	for _, name := range fs.Args() {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		err = res.parse(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	if len(res.benches) == 0 {
		return errors.New("no benchmark results in the input")
	}

	rrs := res.evalRows(rows)
	writeTable(stdout, rrs)

	if *svg != "" {
		if err := writeFile(*svg, func(w io.Writer) error { return writeChart(w, res, chartBars) }); err != nil {
			return err
		}
	}
	if *md != "" {
		chart := ""
		if *svg != "" {
			chart = relPath(filepath.Dir(*md), *svg)
		}
		if err := writeFile(*md, func(w io.Writer) error {
			writeReport(w, res, rrs, reportInfo{env: env}, chart, *tolerance)
			return nil
		}); err != nil {
			return err
		}
	}
	if *js != "" {
		if err := writeFile(*js, func(w io.Writer) error { return writeBaseline(w, toBaseline(rrs, env)) }); err != nil {
			return err
		}
	}
	if *checkFile != "" {
		f, err := os.Open(*checkFile)
		if err != nil {
			return err
		}
		bl, err := readBaseline(f)
		f.Close()
		if err != nil {
			return err
		}
		vs, failed := check(bl, rrs, *tolerance, *guardAll)
		fmt.Fprintln(stdout)
		writeVerdicts(stdout, vs, *tolerance)
		if failed {
			return errRegressed
		}
	}
	return nil
}

// writeFile writes through fill into a temporary file and renames it over
// path, so a failed run never leaves half a report.
func writeFile(path string, fill func(io.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := fill(tmp); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// relPath is target relative to dir when it can be, else target.
func relPath(dir, target string) string {
	if rel, err := filepath.Rel(dir, target); err == nil {
		return rel
	}
	return target
}
