package echoprom_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/contrib/prometheus"
	"github.com/echocache/echocache/echotest"
	"github.com/echocache/echocache/internal/lanescene"
)

// TestScrapeLanes: echomq_queue_waiting_jobs{set} and echomq_queue_lanes{state} are the
// queue's Counts, before and after the scene's claim (lanescene).
func TestScrapeLanes(t *testing.T) {
	t.Parallel()
	b := echotest.Valkey(t).Bus(t, nil)
	q := echotest.Name(t)
	reg := prometheus.NewRegistry()
	reg.MustRegister(echoprom.NewCollector(b, &echoprom.CollectorOpts{Queues: []string{q}, NoTables: true}))
	// scraped is the two lane gauges' samples, keyed as lanescene.Check reads them ("waiting/lanes", "lanes/held", ...).
	scraped := func() map[string]float64 {
		t.Helper()
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(strings.NewReader(scrape(t, reg)))
		require.NoError(t, err)
		out := map[string]float64{}
		for name, key := range map[string]string{"echomq_queue_waiting_jobs": "waiting/", "echomq_queue_lanes": "lanes/"} {
			for _, m := range fams[name].GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "set" || l.GetName() == "state" {
						out[key+l.GetValue()] = m.GetGauge().GetValue()
					}
				}
			}
		}
		return out
	}
	lanescene.Check(t, b, q, scraped)
}
