package cache

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const (
	ver = "VERSION000000001"
	exp = int64(1_800_000_000_000) // an expiry hint, unix ms
)

func TestRowRoundTrip(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		row  string
		want row
	}{
		{"value", valueRow(ver, 1500*time.Microsecond, exp, []byte(`{"a":1}`)), row{kind: rowValue, version: ver, delta: 1500 * time.Microsecond, expires: exp, payload: `{"a":1}`}},
		{"empty payload", valueRow(ver, 0, 0, nil), row{kind: rowValue, version: ver}},
		{"not found", notFoundRow(2 * time.Millisecond), row{kind: rowNotFound, delta: 2 * time.Millisecond}},
		{"lease", leaseRow("0123456789abcdef"), row{kind: rowLease, token: "0123456789abcdef"}},
		{"refresh claim", "\xec\x01R0123456789abcdef" + valueRow(ver, time.Millisecond, exp, []byte("x"))[3:],
			row{kind: rowValue, token: "0123456789abcdef", version: ver, delta: time.Millisecond, expires: exp, payload: "x"}},
		{"versioned", versionedRow(ver, 1<<40|7, 1500*time.Microsecond, exp, []byte(`{"a":1}`)),
			row{kind: rowValue, version: ver, vversion: 1<<40 | 7, versioned: true, delta: 1500 * time.Microsecond, expires: exp, payload: `{"a":1}`}},
		{"versioned refresh claim", "\xec\x01S0123456789abcdef" + versionedRow(ver, 3, time.Millisecond, exp, []byte("x"))[3:],
			row{kind: rowValue, token: "0123456789abcdef", version: ver, vversion: 3, versioned: true, delta: time.Millisecond, expires: exp, payload: "x"}},
		{"saturated delta", valueRow(ver, 100*time.Hour, exp, nil), row{kind: rowValue, version: ver, delta: time.Duration(1<<32-1) * time.Microsecond, expires: exp}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, parseRow(tc.row))
		})
	}
}

func TestRowCorrupt(t *testing.T) {
	t.Parallel()
	good := valueRow(ver, time.Millisecond, exp, []byte("payload"))
	for _, s := range []string{
		"", "\xec", "\xec\x01", "x" + good[1:], "\xec\x02" + good[2:],
		"\xec\x01V", "\xec\x01V" + ver, "\xec\x01V" + ver + "\x00\x00\x00", "\xec\x01Q" + good[3:],
		"\xec\x01V" + ver + "\x00\x00\x00\x01" + "\x00\x00\x01", // a short expiry hint
		"\xec\x01L", "\xec\x01L0123456789abcde", "\xec\x01L0123456789abcdef0",
		"\xec\x01N", "\xec\x01N\x00\x00\x00\x00x",
		"\xec\x01R0123456789abcdef", "\xec\x01R0123456789abcdef" + ver, "\xec\x01Rshort",
		"\xec\x01W" + ver + "\x00\x00\x00\x00\x00\x00\x00", "\xec\x01W" + good[3:], // a short value version, then a short expiry
		"\xec\x01S0123456789abcdef" + ver + "\x00\x00\x00",
		strings.Repeat("\xff", 100),
	} {
		require.Equal(t, rowCorrupt, parseRow(s).kind, "%q", s)
	}
	require.Equal(t, rowValue, parseRow(good).kind)
}

// FuzzParseRow: parseRow is total (never panics) and agrees with the builders.
func FuzzParseRow(f *testing.F) {
	f.Add(valueRow(ver, time.Millisecond, exp, []byte(`{"id":1}`)))
	f.Add(notFoundRow(0))
	f.Add(leaseRow("0123456789abcdef"))
	f.Add("\xec\x01R0123456789abcdef" + ver + "\x00\x00\x00\x01\x00\x00\x01\xa3\x00\x00\x00\x00{}")
	f.Add(versionedRow(ver, 42, time.Millisecond, exp, []byte(`{"id":1}`)))
	f.Add("garbage")
	f.Fuzz(func(t *testing.T, s string) {
		r := parseRow(s)
		switch r.kind {
		case rowValue:
			require.Len(t, r.version, tokenLen)
			built, claim := valueRow(r.version, r.delta, r.expires, []byte(r.payload)), "\xec\x01R"
			if r.versioned {
				built, claim = versionedRow(r.version, r.vversion, r.delta, r.expires, []byte(r.payload)), "\xec\x01S"
			}
			if r.token == "" {
				require.Equal(t, s, built)
			} else {
				require.Len(t, r.token, tokenLen)
				require.Equal(t, s, claim+r.token+built[3:])
			}
		case rowNotFound:
			require.Equal(t, s, notFoundRow(r.delta))
		case rowLease:
			require.Equal(t, s, leaseRow(r.token))
		case rowCorrupt:
		default:
			t.Fatalf("parseRow(%q) = kind %d", s, r.kind)
		}
	})
}

func TestXFetch(t *testing.T) {
	t.Parallel()
	const ms = int64(time.Millisecond)
	for _, tc := range []struct {
		name      string
		left      int64
		deltaBeta float64
		u         float64
		want      bool
	}{
		{"off", ms, 0, 0.0001, false},
		{"expired", 0, float64(ms), 0.99, true},
		{"u=0 always refreshes", 1000 * ms, float64(ms), 0, true},
		{"far from expiry", 100 * ms, float64(ms), 0.5, false},                // needs -ln u >= 100
		{"at one delta, u=e^-1", ms, float64(ms), 0.3678, true},               // -ln u = 1.00003
		{"at one delta, u=e^-1+", ms, float64(ms), 0.3680, false},             // -ln u = 0.9997
		{"bigger beta refreshes earlier", 2 * ms, 4 * float64(ms), 0.5, true}, // 4*0.69 >= 2
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, xfetch(tc.left, tc.deltaBeta, tc.u))
		})
	}
}

// TestXFetchProbability: the share of reads that refresh is exp(-left/(delta*beta)), rising
// as expiry nears.
func TestXFetchProbability(t *testing.T) {
	t.Parallel()
	const n = 20000
	deltaBeta := float64(10 * time.Millisecond)
	prev := -1.0
	for _, k := range []float64{4, 2, 1, 0.5, 0.1} { // left, in units of delta*beta
		hits := 0
		for i := range n {
			u := (float64(i) + 0.5) / n // stratified: the exact quantiles of U(0,1)
			if xfetch(int64(k*deltaBeta), deltaBeta, u) {
				hits++
			}
		}
		got := float64(hits) / n
		want := mathExp(-k)
		require.InDelta(t, want, got, 0.001, "left = %v*delta*beta", k)
		require.Greater(t, got, prev, "probability rises as expiry nears")
		prev = got
	}
}
