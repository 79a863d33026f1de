package dash

import (
	"context"
	"net/http"

	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/keys"
)

// The table page: the fleet's tier shares and each cache's report, with the coherence events
// that flushed its L1 (gaps, regressions, epoch changes) and the reconciles.

// cacheRow is one cache's report of the table.
type cacheRow struct {
	cache.CacheReport
	Reads        int64
	L1, L2, Miss float64
}

func (d *Dashboard) tablePage(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("table")
	if err := keys.ValidateName(name); err != nil {
		d.fail(w, r, http.StatusBadRequest, "table: "+err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	defer cancel()
	// A name no table has (a typo) must not read as an empty table.
	err := d.client.Do(ctx, d.client.B().Zscore().Key(keys.TableRegistry()).Member(name).Build()).Error()
	switch {
	case valkey.IsValkeyNil(err):
		d.fail(w, r, http.StatusNotFound, "table "+name+" is not in the registry ("+keys.TableRegistry()+")")
		return
	case err != nil:
		d.fail(w, r, http.StatusBadGateway, err.Error())
		return
	}
	_, trows := d.snapshot(ctx, nil, []string{name})
	row := trows[0]
	if row.Err != "" {
		d.fail(w, r, http.StatusBadGateway, row.Err)
		return
	}
	caches := make([]cacheRow, len(row.fleet.Caches))
	for i, c := range row.fleet.Caches {
		s := c.Stats
		cr := cacheRow{CacheReport: c, Reads: s.L1Hits + s.L2Hits + s.Misses}
		if cr.Reads > 0 {
			cr.L1 = float64(s.L1Hits) / float64(cr.Reads)
			cr.L2 = float64(s.L2Hits) / float64(cr.Reads)
			cr.Miss = float64(s.Misses) / float64(cr.Reads)
		}
		caches[i] = cr
	}
	d.render(w, r, http.StatusOK, "table", "Table "+name, struct {
		Row    tableRow
		Total  cache.Stats
		Fleet  cache.FleetStats
		Caches []cacheRow
	}{row, row.fleet.Total, row.fleet, caches})
}
