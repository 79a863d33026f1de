package dash

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/echocache/echocache/cache"
)

// readTimeout bounds the reads behind one page.
const readTimeout = 5 * time.Second

// overview serves "/": every queue with its counts and throughput, every table with its
// tiers, loads, invalidations and propagation. Three reads: the two registries and the one
// pipelined snapshot.
func (d *Dashboard) overview(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	defer cancel()
	qs, err := d.cfg.Bus.Queues(ctx)
	if err != nil {
		d.fail(w, r, http.StatusBadGateway, err.Error())
		return
	}
	ts, err := cache.Tables(ctx, d.client)
	if err != nil {
		d.fail(w, r, http.StatusBadGateway, err.Error())
		return
	}
	more := 0
	if len(qs) > d.cfg.MaxQueues {
		more, qs = len(qs)-d.cfg.MaxQueues, qs[:d.cfg.MaxQueues]
	}
	qnames := make([]string, len(qs))
	for i, q := range qs {
		qnames[i] = q.Name
	}
	tnames := make([]string, len(ts))
	for i, t := range ts {
		tnames[i] = t.Name
	}
	qrows, trows := d.snapshot(ctx, qnames, tnames)
	var sampleErr string
	if err := d.sampler.lastErr(); err != nil {
		sampleErr = err.Error()
	}
	d.render(w, r, http.StatusOK, "overview", "Overview", struct {
		Queues      []queueRow
		Tables      []tableRow
		More        int
		SampleEvery time.Duration
		Window      time.Duration
		SampleErr   string
	}{qrows, trows, more, d.cfg.SampleEvery, d.cfg.SampleEvery * time.Duration(d.cfg.Samples), sampleErr})
}

// maxLive bounds the names one live refresh reads.
const maxLive = 2000

// live serves "/live?q=<queue>&q=...&t=<table>&t=...": the counts of the visible queues and
// the stats of the visible tables as JSON, read in one pipelined round trip.
func (d *Dashboard) live(w http.ResponseWriter, r *http.Request) {
	qnames, tnames := r.URL.Query()["q"], r.URL.Query()["t"]
	if len(qnames)+len(tnames) > maxLive {
		http.Error(w, "dash: live: more than 2000 names", http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	defer cancel()
	qrows, trows := d.snapshot(ctx, qnames, tnames)
	out := struct {
		At     time.Time  `json:"at"`
		Queues []queueRow `json:"queues"`
		Tables []tableRow `json:"tables"`
	}{time.Now(), qrows, trows}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(out)
}
