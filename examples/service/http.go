package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// maxBody bounds a PUT body; a product is a name and a price.
const maxBody = 4 << 10

// backend is what the HTTP layer needs from the service: reads through the cache, writes to
// the database followed by an invalidation and a re-index job.
type backend interface {
	Read(ctx context.Context, id int64) (p Product, tier string, err error)
	Write(ctx context.Context, id int64, name string, priceCents int64) (p Product, job string, err error)
	Stats(ctx context.Context) (*instanceStats, error)
}

// putReply is the answer to a PUT: the committed row and the id of the re-index job.
type putReply struct {
	Product Product `json:"product"`
	Job     string  `json:"job"`
}

func newMux(b backend, metrics http.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /products/{id}", func(w http.ResponseWriter, r *http.Request) {
		id, ok := productID(w, r)
		if !ok {
			return
		}
		p, tier, err := b.Read(r.Context(), id)
		if err != nil {
			writeErr(w, err)
			return
		}
		w.Header().Set("X-Cache-Tier", tier)
		writeJSON(w, http.StatusOK, p)
	})
	mux.HandleFunc("PUT /products/{id}", func(w http.ResponseWriter, r *http.Request) {
		id, ok := productID(w, r)
		if !ok {
			return
		}
		var in struct {
			Name       *string `json:"name"`
			PriceCents *int64  `json:"price_cents"`
		}
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				httpError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body over %d bytes", maxBody))
				return
			}
			httpError(w, http.StatusBadRequest, "malformed JSON: "+err.Error())
			return
		}
		switch {
		case in.Name == nil || strings.TrimSpace(*in.Name) == "":
			httpError(w, http.StatusUnprocessableEntity, `"name" is required and must not be blank`)
			return
		case len(*in.Name) > 200:
			httpError(w, http.StatusUnprocessableEntity, `"name" is longer than 200 bytes`)
			return
		case in.PriceCents == nil || *in.PriceCents < 0:
			httpError(w, http.StatusUnprocessableEntity, `"price_cents" is required and must be >= 0`)
			return
		}
		p, job, err := b.Write(r.Context(), id, *in.Name, *in.PriceCents)
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, putReply{Product: p, Job: job})
	})
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		st, err := b.Stats(r.Context())
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, st)
	})
	if metrics != nil {
		mux.Handle("GET /metrics", metrics)
	}
	return mux
}

func productID(w http.ResponseWriter, r *http.Request) (int64, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		httpError(w, http.StatusBadRequest, fmt.Sprintf("product id %q is not a positive integer", r.PathValue("id")))
		return 0, false
	}
	return id, true
}

func writeErr(w http.ResponseWriter, err error) {
	if errors.Is(err, errNoProduct) {
		httpError(w, http.StatusNotFound, err.Error())
		return
	}
	httpError(w, http.StatusInternalServerError, err.Error())
}

func httpError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
