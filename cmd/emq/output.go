package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"
)

// Output: every command builds a value, then either prints it as JSON (--json) or renders
// it as text. The JSON shapes are the structs of the commands' files, with json tags; a
// script may rely on them.

// emit prints v as indented JSON when --json is set, else calls text.
func (a *app) emit(v any, text func()) error {
	if a.json {
		return a.printJSON(v)
	}
	text()
	return nil
}

// printJSON prints v as indented JSON and a newline.
func (a *app) printJSON(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding JSON: %w", err)
	}
	_, err = fmt.Fprintf(a.out, "%s\n", b)
	return err
}

// jsonError is what --json prints on stderr when a command fails.
type jsonError struct {
	Error string `json:"error"`
	Exit  int    `json:"exit"`
}

func (a *app) printJSONError(err error, code int) {
	b, _ := json.Marshal(jsonError{Error: err.Error(), Exit: code})
	fmt.Fprintf(a.err, "%s\n", b)
}

// table renders rows of cells aligned in columns, the first row a header.
func (a *app) table(rows [][]string) {
	tw := tabwriter.NewWriter(a.out, 0, 0, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	tw.Flush()
}

// fmtTime is t in UTC to the millisecond, or "-" for the zero time.
func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

// fmtRate is a per-second rate with one decimal.
func fmtRate(r float64) string { return fmt.Sprintf("%.1f/s", r) }

// fmtRatio is part of total as a percentage, or "-" when total is 0.
func fmtRatio(part, total int64) string {
	if total == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(part)/float64(total))
}

// ms is d in milliseconds, the unit of every duration in the JSON output.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// itoa is n in decimal.
func itoa[T ~int | ~int64](n T) string { return fmt.Sprint(int64(n)) }

// printJSONLine prints v as JSON on one line (a stream of documents).
func (a *app) printJSONLine(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding JSON: %w", err)
	}
	_, err = fmt.Fprintf(a.out, "%s\n", b)
	return err
}
