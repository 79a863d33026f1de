package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// fresh builds evaluated rows with the given ratios (0: not measured).
func fresh(t *testing.T, rs []row, ratios map[string]float64) []rowResult {
	t.Helper()
	out := make([]rowResult, 0, len(rs))
	for _, rw := range rs {
		rr := rowResult{row: rw}
		if v, ok := ratios[rw.id]; ok {
			rr.ratio = &summary{n: 5, median: v}
		}
		out = append(out, rr)
	}
	return out
}

func TestCheck(t *testing.T) {
	t.Parallel()
	rs := []row{
		{id: "time", name: "time", better: lower, guard: true},
		{id: "tput", name: "tput", better: higher, guard: true},
		{id: "peer", name: "peer", better: lower},
		{id: "factor", name: "factor", better: neither, guard: true},
	}
	old := toBaseline(fresh(t, rs, map[string]float64{"time": 1.0, "tput": 6.0, "peer": 2.0, "factor": 40}), nil)

	cases := []struct {
		name   string
		ratios map[string]float64
		all    bool
		failed bool
		kinds  map[string]verdictKind
	}{
		{"unchanged", map[string]float64{"time": 1.0, "tput": 6.0, "peer": 2.0, "factor": 40}, false, false,
			map[string]verdictKind{"time": verdictOK, "tput": verdictOK}},
		{"exactly at tolerance passes", map[string]float64{"time": 1.2, "tput": 5.0}, false, false,
			map[string]verdictKind{"time": verdictOK, "tput": verdictOK}},
		{"slower time fails", map[string]float64{"time": 1.21, "tput": 6.0}, false, true,
			map[string]verdictKind{"time": verdictRegressed, "tput": verdictOK}},
		{"lower throughput fails", map[string]float64{"time": 1.0, "tput": 4.9}, false, true,
			map[string]verdictKind{"time": verdictOK, "tput": verdictRegressed}},
		{"improvements pass", map[string]float64{"time": 0.5, "tput": 12}, false, false,
			map[string]verdictKind{"time": verdictOK, "tput": verdictOK}},
		{"a guarded ratio that vanished fails", map[string]float64{"tput": 6.0}, false, true,
			map[string]verdictKind{"time": verdictMissing, "tput": verdictOK}},
		{"unguarded rows are ignored", map[string]float64{"time": 1.0, "tput": 6.0, "peer": 9}, false, false,
			map[string]verdictKind{"time": verdictOK, "tput": verdictOK}},
		{"unless all rows are guarded", map[string]float64{"time": 1.0, "tput": 6.0, "peer": 9}, true, true,
			map[string]verdictKind{"time": verdictOK, "tput": verdictOK, "peer": verdictRegressed}},
		{"a factor without direction is never a regression", map[string]float64{"time": 1.0, "tput": 6.0, "peer": 2.0, "factor": 400}, true, false,
			map[string]verdictKind{"time": verdictOK, "tput": verdictOK, "peer": verdictOK}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			vs, failed := check(old, fresh(t, rs, tc.ratios), 0.20, tc.all)
			require.Equal(t, tc.failed, failed)
			got := map[string]verdictKind{}
			for _, v := range vs {
				got[v.id] = v.kind
			}
			require.Equal(t, tc.kinds, got)
		})
	}

	t.Run("a noisy ratio is held to its measured spread", func(t *testing.T) {
		t.Parallel()
		noisy := []row{{id: "time", name: "time", better: lower, guard: true}}
		old := toBaseline(fresh(t, noisy, map[string]float64{"time": 1.0}), nil)
		*old.Rows[0].Spread = 0.30
		rrs := fresh(t, noisy, map[string]float64{"time": 1.38})
		rrs[0].ratio.spread = 0.10
		vs, failed := check(old, rrs, 0.20, false)
		require.False(t, failed, "38 percent worse is within the 30 + 10 percent the runs measured")
		require.InDelta(t, 0.40, vs[0].allowed, 1e-9)
		rrs[0].ratio.median = 1.41
		rrs[0].ratio.spread = 0.05
		vs, failed = check(old, rrs, 0.20, false)
		require.True(t, failed, "41 percent worse is beyond 30 + 5 percent")
		require.Equal(t, verdictRegressed, vs[0].kind)
	})
	t.Run("a new ratio passes and is listed", func(t *testing.T) {
		t.Parallel()
		empty := toBaseline(fresh(t, rs, nil), nil)
		vs, failed := check(empty, fresh(t, rs, map[string]float64{"time": 3}), 0.20, false)
		require.False(t, failed)
		require.Len(t, vs, 1)
		require.Equal(t, verdictNew, vs[0].kind)
	})
	t.Run("nothing measured on either side: nothing to compare", func(t *testing.T) {
		t.Parallel()
		empty := toBaseline(fresh(t, rs, nil), nil)
		vs, failed := check(empty, fresh(t, rs, nil), 0.20, false)
		require.False(t, failed)
		require.Empty(t, vs)
		var b bytes.Buffer
		writeVerdicts(&b, vs, 0.2)
		require.Contains(t, b.String(), "nothing to compare")
	})
}

func TestWorseBy(t *testing.T) {
	t.Parallel()
	require.InDelta(t, 1.5, worseBy(2, 3, lower), 1e-9)
	require.InDelta(t, 1.5, worseBy(3, 2, higher), 1e-9)
	require.InDelta(t, 0.5, worseBy(2, 1, lower), 1e-9)
}

func TestBaselineRoundTrip(t *testing.T) {
	t.Parallel()
	rs := []row{{id: "a", name: "a", better: lower, guard: true}, {id: "b", name: "b"}}
	bl := toBaseline(fresh(t, rs, map[string]float64{"a": 1.25}), [][2]string{{"date", "today"}})
	var buf bytes.Buffer
	require.NoError(t, writeBaseline(&buf, bl))
	got, err := readBaseline(&buf)
	require.NoError(t, err)
	require.Equal(t, bl, got)
	require.Equal(t, 1.25, *got.Rows[0].Ratio)
	require.Nil(t, got.Rows[1].Ratio, "an unmeasured ratio stays absent, not zero")

	_, err = readBaseline(bytes.NewBufferString("{not json"))
	require.Error(t, err)
}
