package dash

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/keys"
)

// The actions: every state change is a POST that passes Authorize, ReadOnly and the CSRF
// checks, then a confirmation step (the script's dialog, or without script a page that posts
// again with confirm=yes), then one library call, then a redirect to the page it came from
// (303 See Other), which shows what was done.

// bulkBatch is how many jobs one call of a retry-all or purge-all moves; bulkMax, how many one
// click moves at most (click again for more).
const (
	bulkBatch = 500
	bulkMax   = 10_000
)

// actionFunc does one action on queue and says what it did.
type actionFunc func(ctx context.Context, r *http.Request, queue string) (string, error)

// act guards fn: authorization, read-only, CSRF, a valid queue of the registry (and lane,
// for the lane actions), the confirmation.
func (d *Dashboard) act(a Action, fn actionFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
		if d.cfg.Authorize != nil && !d.cfg.Authorize(r, a) {
			d.fail(w, r, http.StatusForbidden, "not authorized to "+string(a))
			return
		}
		if d.cfg.ReadOnly {
			d.fail(w, r, http.StatusForbidden, "this dashboard is read-only")
			return
		}
		if why := d.csrf.check(r); why != "" {
			d.fail(w, r, http.StatusForbidden, why)
			return
		}
		queue, ok := d.knownQueue(w, r)
		if !ok {
			return
		}
		if a == ActionPauseLane || a == ActionResumeLane {
			if err := keys.ValidateLane(r.PostFormValue("lane")); err != nil {
				d.fail(w, r, http.StatusBadRequest, err.Error())
				return
			}
		}
		back := d.backOf(r, queue)
		if r.PostForm.Get("confirm") != "yes" {
			d.confirm(w, r, a, queue, back)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
		defer cancel()
		done, err := fn(ctx, r, queue)
		if err != nil {
			d.fail(w, r, statusOf(err), err.Error())
			return
		}
		sep := "?"
		if strings.Contains(back, "?") {
			sep = "&"
		}
		http.Redirect(w, r, back+sep+"done="+url.QueryEscape(done), http.StatusSeeOther)
	})
}

// backOf is the form's back when it is a path of this dashboard, else the queue's page. A
// control byte disqualifies it: browsers drop tabs and newlines from a Location, so "/\t/x"
// would become "//x", another site.
func (d *Dashboard) backOf(r *http.Request, queue string) string {
	b := r.PostForm.Get("back")
	ctl := strings.ContainsFunc(b, func(c rune) bool { return c < 0x20 || c == 0x7f })
	if strings.HasPrefix(b, d.cfg.Prefix+"/") && !strings.HasPrefix(b, "//") && !strings.ContainsRune(b, '\\') && !ctl {
		return b
	}
	return d.url("/queues/" + url.PathEscape(queue))
}

// confirm renders the confirmation step: the same form again, with confirm=yes.
func (d *Dashboard) confirm(w http.ResponseWriter, r *http.Request, a Action, queue, back string) {
	type field struct{ Name, Value string }
	var fields []field
	for k, vs := range r.PostForm {
		if k == csrfField || k == "confirm" || k == "back" {
			continue
		}
		for _, v := range vs {
			fields = append(fields, field{k, v})
		}
	}
	d.render(w, r, http.StatusOK, "confirm", "Confirm "+string(a), struct {
		Question string
		Action   string
		Fields   []field
		Return   string
	}{describe(a, queue, r), d.url(r.URL.Path), fields, back})
}

// describe is the question the confirmation asks.
func describe(a Action, queue string, r *http.Request) string {
	ids := r.PostForm["id"]
	what := plural(int64(len(ids)), "job") + " " + strings.Join(ids, ", ")
	if r.PostForm.Get("all") == "1" {
		what = fmt.Sprintf("every dead job (up to %d)", bulkMax)
	}
	switch a {
	case ActionPause:
		return "Pause queue " + queue + "? Workers stop claiming until it is resumed."
	case ActionResume:
		return "Resume queue " + queue + "?"
	case ActionRetry:
		return "Retry " + what + " of queue " + queue + "? They go back to pending."
	case ActionPurge:
		return "Purge " + what + " of queue " + queue + "? They are deleted for good."
	case ActionPauseLane:
		return "Pause lane " + r.PostFormValue("lane") + " of queue " + queue + "? Claims skip it while its jobs wait; its running jobs run on."
	case ActionResumeLane:
		return "Resume lane " + r.PostFormValue("lane") + " of queue " + queue + "?"
	case ActionCancel:
		return "Cancel job " + r.PathValue("id") + " of queue " + queue + "?"
	}
	return string(a) + " on queue " + queue + "?"
}

// formIDs parses the form's id values.
func formIDs(r *http.Request) ([]keys.JobID, error) {
	var out []keys.JobID
	for _, s := range r.PostForm["id"] {
		id, err := keys.ParseJobID(s)
		if err != nil {
			return nil, fmt.Errorf("id: %w", err)
		}
		out = append(out, id)
	}
	return out, nil
}

func (d *Dashboard) pause(ctx context.Context, r *http.Request, queue string) (string, error) {
	return "paused " + queue, d.cfg.Bus.Pause(ctx, queue)
}

func (d *Dashboard) resume(ctx context.Context, r *http.Request, queue string) (string, error) {
	return "resumed " + queue, d.cfg.Bus.Resume(ctx, queue)
}

func (d *Dashboard) retry(ctx context.Context, r *http.Request, queue string) (string, error) {
	ids, err := formIDs(r)
	if err != nil {
		return "", err
	}
	if r.PostForm.Get("all") == "1" {
		// Paged by cursor, not from the head: a job that dies again meanwhile (its id is
		// before the cursor) is not retried a second time in the same click.
		total := 0
		var after keys.JobID
		for total < bulkMax {
			p, err := d.cfg.Bus.Browse(ctx, queue, &bus.BrowseOpts{Set: keys.Dead, After: after, Limit: min(bulkBatch, bulkMax-total)})
			if err != nil {
				return "", err
			}
			if len(p.IDs) == 0 {
				break
			}
			n, err := d.cfg.Bus.RetryDead(ctx, queue, p.IDs...)
			if err != nil {
				return "", fmt.Errorf("after %d retried: %w", total, err)
			}
			total += n
			if p.Next.IsZero() {
				break
			}
			after = p.IDs[len(p.IDs)-1]
		}
		return fmt.Sprintf("retried %s of %s", plural(int64(total), "dead job"), queue), nil
	}
	if len(ids) == 0 {
		return "", fmt.Errorf("%w: retry: no id and not all", ErrInvalid)
	}
	n, err := d.cfg.Bus.RetryDead(ctx, queue, ids...)
	return fmt.Sprintf("retried %s of %s", plural(int64(n), "dead job"), queue), err
}

func (d *Dashboard) purge(ctx context.Context, r *http.Request, queue string) (string, error) {
	ids, err := formIDs(r)
	if err != nil {
		return "", err
	}
	if r.PostForm.Get("all") == "1" {
		total := 0
		for total < bulkMax {
			got, err := d.cfg.Bus.PurgeDead(ctx, queue, &bus.PurgeOpts{Limit: min(bulkBatch, bulkMax-total)})
			if err != nil {
				return "", fmt.Errorf("after %d purged: %w", total, err)
			}
			total += len(got)
			if len(got) == 0 {
				break
			}
		}
		return fmt.Sprintf("purged %s of %s", plural(int64(total), "dead job"), queue), nil
	}
	if len(ids) == 0 {
		return "", fmt.Errorf("%w: purge: no id and not all", ErrInvalid)
	}
	got, err := d.cfg.Bus.PurgeDead(ctx, queue, &bus.PurgeOpts{IDs: ids})
	return fmt.Sprintf("purged %s of %s", plural(int64(len(got)), "dead job"), queue), err
}

func (d *Dashboard) cancelJob(ctx context.Context, r *http.Request, queue string) (string, error) {
	id, err := keys.ParseJobID(r.PathValue("id"))
	if err != nil {
		return "", fmt.Errorf("job id: %w", err)
	}
	st, err := d.cfg.Bus.Cancel(ctx, queue, id)
	if err != nil {
		return "", err
	}
	if st == bus.StateActive || st == bus.StateCancelling {
		return fmt.Sprintf("asked %s to stop: it was running; its worker cancels the handler and the job goes to dead", id), nil
	}
	return fmt.Sprintf("cancelled %s (it was %s)", id, st), nil
}

// knownQueue is the request's {queue} when it is a valid name in the queue registry; else it
// answers 400 (a malformed name) or 404 (a name no queue has: a typo must not read as an
// empty queue, nor an action create one) and reports false.
func (d *Dashboard) knownQueue(w http.ResponseWriter, r *http.Request) (string, bool) {
	queue := r.PathValue("queue")
	if err := keys.ValidateName(queue); err != nil {
		d.fail(w, r, http.StatusBadRequest, "queue: "+err.Error())
		return "", false
	}
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	defer cancel()
	err := d.client.Do(ctx, d.client.B().Zscore().Key(keys.QueueRegistry()).Member(queue).Build()).Error()
	switch {
	case valkey.IsValkeyNil(err):
		d.fail(w, r, http.StatusNotFound, "queue "+queue+" is not in the registry ("+keys.QueueRegistry()+")")
		return "", false
	case err != nil:
		d.fail(w, r, http.StatusBadGateway, err.Error())
		return "", false
	}
	return queue, true
}

// statusOf is the HTTP status of an action's error: what was asked for is missing (404),
// in a state the action does not apply to (409) or malformed (400); anything else is Valkey
// failing (502).
func statusOf(err error) int {
	switch {
	case errors.Is(err, bus.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, bus.ErrState):
		return http.StatusConflict
	case errors.Is(err, bus.ErrInvalid), errors.Is(err, keys.ErrInvalid):
		return http.StatusBadRequest
	}
	return http.StatusBadGateway
}
