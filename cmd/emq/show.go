package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/keys"
)

// shownJob is one job as emq show prints it.
type shownJob struct {
	Queue    string    `json:"queue"`
	ID       string    `json:"id"`
	Minted   time.Time `json:"minted"`
	State    string    `json:"state"`
	Attempts int64     `json:"attempts"`
	// Set is the set that holds the id; At its score there (lease deadline, run-at).
	Set string     `json:"set,omitempty"`
	At  *time.Time `json:"at,omitempty"`
	// Lane and Priority are the job's, as enqueued (absent: none, and 0).
	Lane     string `json:"lane,omitempty"`
	Priority int    `json:"priority,omitempty"`
	// Kind and Args are the envelope's, when the payload is one; Args is the JSON value when
	// the args are JSON, else Text holds them when they are UTF-8, else Base64.
	Kind string `json:"kind,omitempty"`
	// Headers are the envelope's header block (the trace context, say), when it has one.
	Headers map[string]string `json:"headers,omitempty"`
	Args    json.RawMessage   `json:"args,omitempty"`
	Text    *string           `json:"text,omitempty"`
	Base64  []byte            `json:"base64,omitempty"`
	Size    int               `json:"payload_bytes"`
	// Failures is the job's failure history, oldest first (absent when it never failed).
	Failures []shownFailure `json:"failures,omitempty"`
	// Result is the kept result of a retired job (state "retired"), decoded like the args.
	Result *shownBytes `json:"result,omitempty"`
}

// shownFailure is one failed attempt: its token, the server's time and the error text.
type shownFailure struct {
	Attempt int64     `json:"attempt"`
	At      time.Time `json:"at"`
	Error   string    `json:"error"`
}

// shownBytes is an opaque value decoded for reading: JSON when it is JSON, else Text when it
// is UTF-8, else Base64.
type shownBytes struct {
	JSON   json.RawMessage `json:"json,omitempty"`
	Text   *string         `json:"text,omitempty"`
	Base64 []byte          `json:"base64,omitempty"`
	Size   int             `json:"bytes"`
}

// decodeBytes is b as show prints it. JSON must be UTF-8 too: encoding/json's validator
// accepts other bytes in strings, which --json would then print as they are (not JSON).
func decodeBytes(b []byte) shownBytes {
	d := shownBytes{Size: len(b)}
	switch {
	case json.Valid(b) && utf8.Valid(b) && len(bytes.TrimSpace(b)) > 0:
		d.JSON = json.RawMessage(b)
	case utf8.Valid(b):
		s := string(b)
		d.Text = &s
	default:
		d.Base64 = b
	}
	return d
}

func showCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "show <queue> <id>",
		Short: "Show one job: its state, attempts, payload, failures and result",
		Long: `Show one job of a queue: its state, attempts (the fencing token), the set that holds it
with the lease deadline or run-at, its lane and priority when it has them, its payload and its failure history (each failed attempt's
token, server time and error text, oldest first; the last 10 are kept). A task envelope (kind
NUL args) is decoded: the kind, and the args as JSON when they are JSON, as text when they
are UTF-8, else in base64. A job completed with a kept result shows state "retired", its
completion time and the result, decoded the same way. Exit 3 when the job has neither row
nor kept result (never enqueued, completed without a result or past its TTL, cancelled or
purged).`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseJobID(args[1])
			if err != nil {
				return err
			}
			ctx, cancel, err := a.openQueue(args[0])
			if err != nil {
				return err
			}
			defer cancel()
			info, err := a.bus.Lookup(ctx, args[0], id)
			if err != nil {
				return err
			}
			j := describeJob(args[0], info)
			return a.emit(j, func() { a.printJob(j) })
		},
	}
}

// describeJob is info as show prints it, the envelope decoded.
func describeJob(queue string, info bus.JobInfo) shownJob {
	j := shownJob{Queue: queue, ID: info.ID.String(), Minted: info.ID.Time(), State: string(info.State),
		Attempts: info.Attempts, Size: len(info.Payload), Lane: info.Lane, Priority: info.Priority}
	if info.Set != 0 {
		j.Set = setName(info.Set)
	}
	if !info.At.IsZero() {
		at := info.At
		j.At = &at
	}
	for _, f := range info.Failures {
		j.Failures = append(j.Failures, shownFailure{Attempt: f.Attempt, At: f.At, Error: f.Error})
	}
	if info.State == bus.StateRetired {
		r := decodeBytes(info.Result)
		j.Result = &r
		return j
	}
	body := info.Payload
	if kind, args, err := bus.ParseEnvelope(info.Payload); err == nil {
		j.Kind, body = kind, args
		hs, _ := bus.EnvelopeHeaders(info.Payload)
		for _, h := range hs {
			if j.Headers == nil {
				j.Headers = map[string]string{}
			}
			j.Headers[h.Name] = h.Value
		}
	}
	d := decodeBytes(body)
	j.Args, j.Text, j.Base64 = d.JSON, d.Text, d.Base64
	return j
}

// setName is the name ls and show use for a set.
func setName(t keys.Type) string {
	switch t {
	case keys.Pending:
		return "pending"
	case keys.Active:
		return "active"
	case keys.Schedule:
		return "scheduled"
	case keys.Dead:
		return "dead"
	}
	return t.String()
}

func (a *app) printJob(j shownJob) {
	rows := [][]string{
		{"queue", j.Queue}, {"id", j.ID}, {"minted", fmtTime(j.Minted)}, {"state", j.State},
		{"attempts", itoa(j.Attempts)},
	}
	if j.Set != "" {
		rows = append(rows, []string{"set", j.Set})
	}
	if j.At != nil {
		label := "at"
		switch j.Set {
		case "active":
			label = "lease until"
		case "scheduled":
			label = "run at"
		}
		if j.State == string(bus.StateRetired) {
			label = "retired at"
		}
		rows = append(rows, []string{label, fmtTime(*j.At)})
	}
	if j.Lane != "" {
		rows = append(rows, []string{"lane", j.Lane})
	}
	if j.Priority != 0 {
		rows = append(rows, []string{"priority", itoa(int64(j.Priority))})
	}
	if j.Kind != "" {
		rows = append(rows, []string{"kind", j.Kind})
	}
	for _, name := range slices.Sorted(maps.Keys(j.Headers)) {
		rows = append(rows, []string{"header " + name, j.Headers[name]})
	}
	if j.Result == nil {
		rows = append(rows, []string{"payload", fmt.Sprintf("%d bytes", j.Size)})
	} else {
		rows = append(rows, []string{"result", fmt.Sprintf("%d bytes", j.Result.Size)})
	}
	for i := range rows {
		rows[i][0] += ":"
	}
	a.table(rows)
	if len(j.Failures) > 0 {
		fmt.Fprintln(a.out, "failures:")
		t := [][]string{{"ATTEMPT", "AT", "ERROR"}}
		for _, f := range j.Failures {
			t = append(t, []string{itoa(f.Attempt), fmtTime(f.At), oneLine(f.Error)})
		}
		a.table(t)
	}
	if j.Result != nil {
		a.printBytes("result", *j.Result)
		return
	}
	a.printBytes("args", shownBytes{JSON: j.Args, Text: j.Text, Base64: j.Base64})
}

// oneLine is s with its line breaks and tabs escaped, so an error text stays one table row,
// and its other control characters too (see shown).
func oneLine(s string) string {
	return shown(strings.NewReplacer("\n", `\n`, "\r", `\r`, "\t", `\t`).Replace(s))
}

// shown is s with its control characters but line breaks and tabs escaped (\x1b, \u009b), so
// text from a job cannot send the operator's terminal a control sequence.
func shown(s string) string {
	ctl := func(r rune) bool { return r != '\n' && r != '\t' && (r < 0x20 || r >= 0x7f && r < 0xa0) }
	if !strings.ContainsFunc(s, ctl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case !ctl(r):
			b.WriteRune(r)
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}

// printBytes prints a decoded value under its label: indented JSON, text, or base64.
func (a *app) printBytes(label string, d shownBytes) {
	switch {
	case d.JSON != nil:
		var buf bytes.Buffer
		if json.Indent(&buf, d.JSON, "", "  ") != nil {
			buf.Reset()
			buf.Write(d.JSON)
		}
		// JSON escapes C0 controls but may hold DEL and the C1 controls raw (U+009B is a
		// terminal's CSI): they are escaped as in text.
		fmt.Fprintf(a.out, "%s:\n%s\n", label, shown(buf.String()))
	case d.Text != nil:
		fmt.Fprintf(a.out, "%s:\n%s\n", label, shown(*d.Text))
	default:
		fmt.Fprintf(a.out, "%s (base64):\n%s\n", label, jsonBase64(d.Base64))
	}
}

// jsonBase64 is b in standard base64, as encoding/json writes it.
func jsonBase64(b []byte) string {
	s, _ := json.Marshal(b)
	return string(s[1 : len(s)-1])
}
