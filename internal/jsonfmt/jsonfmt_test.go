package jsonfmt

import (
	"encoding/json"
	"math"
	"reflect"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type inner struct {
	A int `json:"a,omitempty"`
	B string
}

type embedded struct{ E int }

// sample has a field of every kind the codecs meet in rows and task args.
type sample struct {
	embedded
	ID      int64             `json:"id"`
	Name    string            `json:"name"`
	Tags    []string          `json:"tags"`
	P       *inner            `json:"p"`
	M       map[string]any    `json:"m"`
	MI      map[int]string    `json:"mi"`
	MS      map[string]string `json:"ms"`
	S       []inner           `json:"s"`
	Bytes   []byte            `json:"bytes"`
	T       time.Time         `json:"t"`
	Raw     json.RawMessage   `json:"raw"`
	F       float64           `json:"f"`
	F32     float32           `json:"f32"`
	Any     any               `json:"any"`
	Quoted  int               `json:"quoted,string"`
	Skipped int               `json:"-"`
	Arr     [2]int            `json:"arr"`
	U       uint64            `json:"u"`
	Empty   []int             `json:"empty,omitempty"`
	B       bool              `json:"b"`
}

func TestMarshalParity(t *testing.T) {
	for i, v := range []any{
		sample{embedded: embedded{3}, ID: -1, Name: "a<b>&c \u2028\u2029 \x00 \xff", Tags: []string{"x", ""},
			P: &inner{B: "é"}, M: map[string]any{"z": 1.5, "a": []any{1, "x", nil}, "m": map[string]any{"q": true}},
			MI: map[int]string{3: "c", 1: "a", 20: "t"}, MS: map[string]string{"\u007f": "del", "<": ">"},
			S: []inner{{1, "y"}}, Bytes: []byte("hello\x00"), T: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC),
			Raw: json.RawMessage(`{"k":[1,2]}`), F: 1e21, F32: 3.14, Any: map[string]int{"b": 2, "a": 1}, Quoted: 7,
			Arr: [2]int{1, 2}, U: math.MaxUint64, B: true},
		[]float64{0, math.Copysign(0, -1), 1e-7, 1e20, 1e21, 123456789.123, math.SmallestNonzeroFloat64, math.MaxFloat64},
		"\t\n\r\"\\/ \u00e9 \U0001F600",
		nil,
	} {
		want, werr := json.Marshal(v)
		got, gerr := Marshal(v)
		require.NoError(t, werr)
		require.NoError(t, gerr)
		assert.Equal(t, string(want), string(got), "value %d", i)
	}
	_, err := Marshal(math.NaN())
	assert.Error(t, err, "NaN is refused, as by encoding/json")
}

// parityInputs are inputs on which fast JSON decoders have parted from encoding/json.
var parityInputs = []string{
	`{"id":1,"name":"x","tags":["a"],"m":{"a":1},"p":{"a":2,"B":"y"},"f":1.5,"any":[1,{"x":null}],"b":true,"ms":{"k":"v"}}`,
	`{"ID":1,"NAME":"case-insensitive"}`,
	`{"00":0,"0000":"0","0000":[""],"0":{"0"00},"0":{"0"000"0"0"0"},"0":00}`, // invalid JSON in unknown fields
	`{"m":{"\x84":""}}`,                     // invalid UTF-8 in a key
	`{"name":"\xff\xfe"}`,                   // invalid UTF-8 in a value
	`{"name":"\ud800 \udc00 \ud83d\ude00"}`, // lone and paired surrogates
	`{"id":1.0e2}`, `{"id":1.5}`, `{"id":"1"}`, `{"id":9223372036854775808}`,
	`{"id":1}x`, `[1,2]`, `{"id":1,"id":2}`, `{"name":null}`, `{"quoted":"12"}`, `{"quoted":12}`,
	`{"f":1e400}`, `{"raw":{"a" : [ 1 ]}}`, `{"bytes":"aGVsbG8="}`, `{"bytes":"not base64"}`,
	`{"t":"2026-01-02T03:04:05Z"}`, `{"t":"yesterday"}`, `{"t":"0000-01-01W00:00:00Z"}`, ` {"b":true} `, ``, `{`, `null`,
}

// wSeparated finds a timestamp whose date and time are joined by W instead of T.
var wSeparated = regexp.MustCompile(`(\d{4}-\d{2}-\d{2})W(\d{2}:)`)

// timeLeniency reports the one known difference (see the package doc): jsonfmt accepts in,
// encoding/json refuses it, and encoding/json accepts it, to the same value, once every
// W-joined timestamp is T-joined.
func timeLeniency(in string, got sample) bool {
	fixed := wSeparated.ReplaceAllString(in, "${1}T${2}")
	var want sample
	return fixed != in && json.Unmarshal([]byte(fixed), &want) == nil && reflect.DeepEqual(want, got)
}

func checkParity(t *testing.T, in string) {
	var want, got sample
	werr := json.Unmarshal([]byte(in), &want)
	gerr := Unmarshal([]byte(in), &got)
	if werr != nil && gerr == nil && timeLeniency(in, got) {
		return
	}
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%q: encoding/json says %v, jsonfmt says %v", in, werr, gerr)
	}
	if werr == nil && !reflect.DeepEqual(want, got) {
		t.Fatalf("%q: encoding/json gives %+v, jsonfmt %+v", in, want, got)
	}
}

func TestUnmarshalParity(t *testing.T) {
	for _, in := range parityInputs {
		checkParity(t, in)
	}
}

// TestTimeLeniency pins the one known difference, found by FuzzParity: a time.Time whose date
// and time are joined by W is read as if joined by T, where encoding/json refuses it. Every
// other malformed timestamp tried is refused by both.
func TestTimeLeniency(t *testing.T) {
	in := `{"t":"2026-01-02W03:04:05Z"}`
	var want, got sample
	require.Error(t, json.Unmarshal([]byte(in), &want))
	require.NoError(t, Unmarshal([]byte(in), &got))
	assert.True(t, timeLeniency(in, got))
	for _, bad := range []string{`{"t":"2026-01-02X03:04:05Z"}`, `{"t":"2026-01-02t03:04:05Z"}`,
		`{"t":"2026-01-02 03:04:05Z"}`, `{"t":"2026-01-02T03:04:05"}`, `{"t":"20260102T030405Z"}`,
		`{"t":"2026-01-02T24:00:00Z"}`, `{"t":"2026-02-30T00:00:00Z"}`, `{"t":"2026-01-02T03:04:05\u005a"}`} {
		checkParity(t, bad)
		require.Error(t, Unmarshal([]byte(bad), &got), bad)
	}
}

// FuzzTimeParity: every time encoding/json writes reads back the same through jsonfmt.
func FuzzTimeParity(f *testing.F) {
	f.Add(int64(0), int64(0), 0)
	f.Add(int64(1798675200), int64(123456789), 19800)
	f.Add(int64(-62135596800), int64(1), -3600)
	f.Fuzz(func(t *testing.T, sec, nsec int64, offset int) {
		tm := time.Unix(sec, nsec%1e9).In(time.FixedZone("", offset%86400))
		data, err := json.Marshal(tm)
		if err != nil {
			return // outside the years encoding/json writes
		}
		var want, got time.Time
		require.NoError(t, json.Unmarshal(data, &want))
		require.NoError(t, Unmarshal(data, &got), "%s", data)
		require.True(t, want.Equal(got), "%s: %v against %v", data, want, got)
		_, wo := want.Zone()
		_, goff := got.Zone()
		require.Equal(t, wo, goff, "%s: the offset", data)
	})
}

func TestUnmarshalKeepsNothing(t *testing.T) {
	data := []byte(`{"name":"abc","raw":[1],"tags":["x"]}`)
	var v sample
	require.NoError(t, Unmarshal(data, &v))
	for i := range data {
		data[i] = '#'
	}
	assert.Equal(t, "abc", v.Name)
	assert.Equal(t, `[1]`, string(v.Raw))
	assert.Equal(t, []string{"x"}, v.Tags)
}

// FuzzParity: every input decodes as encoding/json decodes it, or fails as it fails.
func FuzzParity(f *testing.F) {
	for _, in := range parityInputs {
		f.Add(in)
	}
	f.Fuzz(checkParity)
}

// FuzzMarshalParity: values built from any string, number and flag encode to the bytes
// encoding/json writes (escapes, invalid UTF-8, float forms, map key order).
func FuzzMarshalParity(f *testing.F) {
	f.Add("a<b>&\u2028\xff", 1.5, int64(3), true)
	f.Add("", 1e-7, int64(-1), false)
	f.Add("\x00\t\"\\/", 1e21, int64(math.MinInt64), true)
	f.Fuzz(func(t *testing.T, s string, x float64, i int64, b bool) {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return // refused by both (TestMarshalParity)
		}
		v := map[string]any{
			s:     []any{s, x, i, b, nil, map[string]float64{"k" + s: x}},
			"row": sample{ID: i, Name: s, Tags: []string{s}, F: x, F32: float32(x), B: b, MS: map[string]string{s: s}},
		}
		want, werr := json.Marshal(v)
		got, gerr := Marshal(v)
		if (werr == nil) != (gerr == nil) || string(want) != string(got) {
			t.Fatalf("encoding/json: %s %v\njsonfmt:       %s %v", want, werr, got, gerr)
		}
	})
}

func BenchmarkUnmarshal(b *testing.B) {
	data := []byte(`{"id":42,"name":"user-42","tags":["a","b"],"f":1.5,"b":true}`)
	b.Run("jsonfmt", func(b *testing.B) {
		b.ReportAllocs()
		var v sample
		for b.Loop() {
			if err := Unmarshal(data, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		var v sample
		for b.Loop() {
			if err := json.Unmarshal(data, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
}
