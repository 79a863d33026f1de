package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
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
	// Kind and Args are the envelope's, when the payload is one; Args is the JSON value when
	// the args are JSON, else Text holds them when they are UTF-8, else Base64.
	Kind string `json:"kind,omitempty"`
	// Headers are the envelope's header block (the trace context, say), when it has one.
	Headers map[string]string `json:"headers,omitempty"`
	Args    json.RawMessage   `json:"args,omitempty"`
	Text    *string           `json:"text,omitempty"`
	Base64  []byte            `json:"base64,omitempty"`
	Size    int               `json:"payload_bytes"`
}

func showCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "show <queue> <id>",
		Short: "Show one job: its state, attempts and payload",
		Long: `Show one job of a queue: its state, attempts (the fencing token), the set that holds it
with the lease deadline or run-at, and its payload. A task envelope (kind NUL args) is
decoded: the kind, and the args as JSON when they are JSON, as text when they are UTF-8, else
in base64. Exit 3 when the job has no row (never enqueued, completed, cancelled or purged).`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseJobID(args[1])
			if err != nil {
				return err
			}
			if err := a.connect(); err != nil {
				return err
			}
			ctx, cancel := a.ctx()
			defer cancel()
			if err := a.requireQueue(ctx, args[0]); err != nil {
				return err
			}
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
		Attempts: info.Attempts, Size: len(info.Payload)}
	if info.Set != 0 {
		j.Set = setName(info.Set)
	}
	if !info.At.IsZero() {
		at := info.At
		j.At = &at
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
	switch {
	case json.Valid(body) && len(bytes.TrimSpace(body)) > 0:
		j.Args = json.RawMessage(body)
	case utf8.Valid(body):
		s := string(body)
		j.Text = &s
	default:
		j.Base64 = body
	}
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
		rows = append(rows, []string{label, fmtTime(*j.At)})
	}
	if j.Kind != "" {
		rows = append(rows, []string{"kind", j.Kind})
	}
	for _, name := range slices.Sorted(maps.Keys(j.Headers)) {
		rows = append(rows, []string{"header " + name, j.Headers[name]})
	}
	rows = append(rows, []string{"payload", fmt.Sprintf("%d bytes", j.Size)})
	for i := range rows {
		rows[i][0] += ":"
	}
	a.table(rows)
	switch {
	case j.Args != nil:
		var buf bytes.Buffer
		if json.Indent(&buf, j.Args, "", "  ") == nil {
			fmt.Fprintf(a.out, "args:\n%s\n", buf.Bytes())
		}
	case j.Text != nil:
		fmt.Fprintf(a.out, "args:\n%s\n", *j.Text)
	default:
		fmt.Fprintf(a.out, "args (base64):\n%s\n", jsonBase64(j.Base64))
	}
}

// jsonBase64 is b in standard base64, as encoding/json writes it.
func jsonBase64(b []byte) string {
	s, _ := json.Marshal(b)
	return string(s[1 : len(s)-1])
}
