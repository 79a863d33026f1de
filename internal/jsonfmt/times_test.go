package jsonfmt

import (
	stdjson "encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMarshalRefusesTimesAsEncodingJSON: a time.Time that json.Marshal refuses (a year outside
// 0 to 9999, a zone offset of a day or more) fails Marshal with json.Marshal's error wherever
// it sits (a field, a pointer, a slice, a map, an interface, an embedded unexported struct);
// before, the library wrote a string that neither decoder reads back. Every time json.Marshal
// takes is written as it writes it.
func TestMarshalRefusesTimesAsEncodingJSON(t *testing.T) {
	type inner struct{ At time.Time }
	type embedded struct{ When time.Time }
	type outer struct {
		embedded
		In    inner
		Ptr   *time.Time
		List  []time.Time
		Map   map[string]time.Time
		Any   any
		Skip  time.Time `json:"-"`
		quiet time.Time
	}
	far := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	before := time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)
	dayOff := time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("x", 24*3600))
	almost := time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("y", 23*3600+59*60))
	for name, v := range map[string]any{
		"field":     inner{At: far},
		"pointer":   &inner{At: before},
		"ptr field": outer{Ptr: &far},
		"slice":     outer{List: []time.Time{time.Now(), far}},
		"map":       outer{Map: map[string]time.Time{"k": before}},
		"interface": outer{Any: far},
		"embedded":  outer{embedded: embedded{When: far}},
		"offset":    inner{At: dayOff},
		"top":       far,
	} {
		_, want := stdjson.Marshal(v)
		require.Error(t, want, name)
		_, err := Marshal(v)
		require.EqualError(t, err, want.Error(), name)
	}
	for name, v := range map[string]any{
		"valid":        outer{In: inner{At: time.Date(9999, 12, 31, 23, 59, 59, 999, time.UTC)}, List: []time.Time{{}}, Any: almost},
		"skipped":      outer{Skip: far, quiet: far},
		"no time":      map[string]int{"a": 1},
		"nil":          nil,
		"nil pointers": outer{Any: (*time.Time)(nil)},
	} {
		want, err := stdjson.Marshal(v)
		require.NoError(t, err, name)
		got, err := Marshal(v)
		require.NoError(t, err, name)
		require.Equal(t, string(want), string(got), name)
	}
}

// BenchmarkMarshalNoTime: a value whose type holds no time.Time pays one lookup.
func BenchmarkMarshalNoTime(b *testing.B) {
	type row struct {
		ID   int64
		Name string
	}
	v := row{1, "x"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Marshal(v); err != nil {
			b.Fatal(err)
		}
	}
}
