package dash

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"unicode/utf8"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/keys"
)

// maxShownPayload bounds the payload bytes the job page shows.
const maxShownPayload = 64 << 10

// payloadView is a job's payload as the page shows it.
type payloadView struct {
	Kind      string // the task's kind when the payload is an envelope
	Text      string // pretty JSON, the text, or a hex dump
	Format    string // "json", "text" or "hex"
	Size      int
	Truncated bool
}

// showPayload pretty-prints p: an envelope's JSON args, JSON, UTF-8 text, else hex.
func showPayload(p []byte) payloadView {
	v := payloadView{Size: len(p)}
	body := p
	if kind, b, err := bus.ParseEnvelope(p); err == nil {
		v.Kind, body = kind, b
	}
	if len(body) > maxShownPayload {
		// Cut at a character's start, so that UTF-8 text cut short is still text.
		cut := maxShownPayload
		for k := cut; k > cut-utf8.UTFMax; k-- {
			if utf8.RuneStart(body[k]) {
				cut = k
				break
			}
		}
		body, v.Truncated = body[:cut], true
	}
	var out bytes.Buffer
	switch {
	case !v.Truncated && json.Valid(body) && json.Indent(&out, body, "", "  ") == nil:
		v.Format, v.Text = "json", out.String()
	case utf8.Valid(body):
		v.Format, v.Text = "text", string(body)
	default:
		v.Format, v.Text = "hex", hex.Dump(body)
	}
	return v
}

func (d *Dashboard) jobPage(w http.ResponseWriter, r *http.Request) {
	queue, ok := d.knownQueue(w, r)
	if !ok {
		return
	}
	id, err := keys.ParseJobID(r.PathValue("id"))
	if err != nil {
		d.fail(w, r, http.StatusBadRequest, "job id: "+err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	defer cancel()
	info, err := d.cfg.Bus.Lookup(ctx, queue, id)
	switch {
	case errors.Is(err, bus.ErrNotFound):
		d.fail(w, r, http.StatusNotFound, "job "+id.String()+" of queue "+queue+" has no row: never enqueued, completed (without a kept result), cancelled or purged")
		return
	case err != nil:
		d.fail(w, r, http.StatusBadGateway, err.Error())
		return
	}
	var result *payloadView
	if info.Result != nil {
		v := showPayload(info.Result)
		result = &v
	}
	d.render(w, r, http.StatusOK, "job", "Job "+id.String(), struct {
		Queue       string
		Info        bus.JobInfo
		Set         string
		AtLabel     string
		Payload     payloadView
		Result      *payloadView
		MaxFailures int
		CanRetry    bool
		CanCancel   bool
	}{queue, info, setName(info.Set), atLabel(info.State), showPayload(info.Payload), result, bus.MaxFailures,
		info.State == bus.StateDead,
		info.State == bus.StatePending || info.State == bus.StateScheduled || info.State == bus.StateActive})
}

// atLabel names JobInfo.At for a state.
func atLabel(s bus.State) string {
	switch s {
	case bus.StateActive, bus.StateCancelling:
		return "Lease deadline"
	case bus.StateScheduled:
		return "Runs at"
	case bus.StateRetired:
		return "Completed"
	}
	return "At"
}

// setName is the tab name of a set.
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
	return ""
}
