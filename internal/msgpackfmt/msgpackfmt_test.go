package msgpackfmt

import (
	"encoding/binary"
	"math"
	"reflect"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
)

// row is the shape of the benchmarks' rows.
type row struct {
	ID      int64  `json:"id"`
	Name    string `json:"name"`
	Email   string `json:"email"`
	Balance int64  `json:"balance"`
	Active  bool   `json:"active"`
}

type label string

// allKinds has a field of every kind the flat decoder reads, and the tag forms it accepts.
type allKinds struct {
	B       bool
	I       int     `json:"i"`
	I8      int8    `json:"i8"`
	I16     int16   `json:"i16"`
	I32     int32   `json:"i32,omitempty"`
	I64     int64   `json:"i64"`
	U       uint    `json:"u"`
	U8      uint8   `json:"u8"`
	U16     uint16  `json:"u16"`
	U32     uint32  `json:"u32"`
	U64     uint64  `json:"u64"`
	F32     float32 `json:"f32"`
	F64     float64 `json:"f64"`
	S       string  `json:"s"`
	L       label   `json:"l"`
	Own     int     `msgpack:"own" json:"not-this"`
	Skipped string  `json:"-"`
	hidden  int
}

type (
	withTime struct{ T time.Time }
	// stamped is a row with timestamps, the most common field beyond the scalars.
	stamped struct {
		ID      int64     `json:"id"`
		Created time.Time `json:"created"`
		Updated time.Time `json:"updated,omitempty"`
		Note    string    `json:"note"`
	}
	withBytes    struct{ B []byte }
	withPointer  struct{ P *int }
	withEmbedded struct {
		row
		X int
	}
	withAlias struct {
		A int `msgpack:"a,alias:b"`
	}
	withIntern struct {
		S string `msgpack:",intern"`
	}
	withDuplicate struct {
		A int `json:"x"`
		B int `msgpack:"x"`
	}
	customRow struct{ A int }
	textLabel string
	withText  struct{ L textLabel }
	// omitted has an omitempty bool where a false probe value would leave it out.
	omitted struct {
		A int  `json:"a"`
		B bool `json:"b,omitempty"`
	}
)

func (c *customRow) DecodeMsgpack(d *msgpack.Decoder) error { return d.Decode(&c.A) }
func (l *textLabel) UnmarshalText(b []byte) error           { *l = textLabel(b); return nil }

func TestFlatTypes(t *testing.T) {
	assert.NotNil(t, planFor[row](), "row")
	assert.NotNil(t, planFor[allKinds](), "allKinds")
	assert.NotNil(t, planFor[struct{}](), "an empty struct")
	assert.NotNil(t, planFor[omitted](), "an omitempty bool")
	assert.NotNil(t, planFor[withTime](), "a time.Time field")
	assert.NotNil(t, planFor[stamped](), "a row with times")
	assert.Nil(t, planFor[withBytes](), "a []byte field")
	assert.Nil(t, planFor[withPointer](), "a pointer field")
	assert.Nil(t, planFor[withEmbedded](), "an embedded struct")
	assert.Nil(t, planFor[withAlias](), "an alias, a second name the library reads")
	assert.Nil(t, planFor[withIntern](), "an interned string")
	assert.Nil(t, planFor[withDuplicate](), "two fields of one name")
	assert.Nil(t, planFor[customRow](), "a struct that decodes itself")
	assert.Nil(t, planFor[withText](), "a field that decodes itself (TextUnmarshaler)")
	assert.Nil(t, planFor[map[string]int](), "not a struct")
	assert.Nil(t, planFor[int](), "not a struct")
	p := planFor[allKinds]()
	names := []string{}
	for _, f := range p.fields {
		names = append(names, f.name)
	}
	assert.Equal(t, []string{"B", "i", "i8", "i16", "i32", "i64", "u", "u8", "u16", "u32", "u64", "f32", "f64", "s", "l", "own"}, names)
}

func TestRoundTrip(t *testing.T) {
	in := allKinds{B: true, I: -1, I8: -128, I16: 300, I32: -70000, I64: math.MinInt64, U: 7, U8: 255, U16: 65535,
		U32: math.MaxUint32, U64: math.MaxUint64, F32: 3.25, F64: -1e300, S: "héllo \x00 \xff", L: "lbl", Own: 9}
	data, err := Marshal(&in)
	require.NoError(t, err)
	var flat, lib allKinds
	require.True(t, planFor[allKinds]().decode(data, unsafe.Pointer(&flat)), "the flat decoder reads what the library writes")
	require.NoError(t, libraryUnmarshal(data, &lib))
	assert.Equal(t, in, flat)
	assert.Equal(t, lib, flat)

	// Every form the library writes a time in: 4 bytes (whole seconds), 8 (nanoseconds), 12
	// (before 1970 or past 2514), and the zero time.
	for _, at := range []time.Time{time.Unix(1_700_000_000, 0), time.Unix(1_700_000_000, 999_999_999),
		time.Unix(-1, 5), time.Unix(1<<35, 7), {}, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)} {
		in := stamped{ID: 1, Created: at, Note: "n"}
		data, err := Marshal(in)
		require.NoError(t, err)
		var flat, lib stamped
		require.True(t, planFor[stamped]().decode(data, unsafe.Pointer(&flat)), "%v", at)
		require.NoError(t, libraryUnmarshal(data, &lib))
		assert.Equal(t, lib, flat, "%v", at)
		assert.True(t, at.Equal(flat.Created), "%v", at)
	}

	r := row{ID: 42, Name: "Ada", Email: "ada@example.com", Balance: -5, Active: true}
	data, err = Marshal(r)
	require.NoError(t, err)
	var got row
	require.NoError(t, Unmarshal(data, &got))
	assert.Equal(t, r, got)
}

// TestFallback: what the flat decoder does not read goes to the library, which gives its own
// result, the error and the partial value included.
func TestFallback(t *testing.T) {
	for name, data := range map[string][]byte{
		"nil":           {codeNil},
		"array":         {0x92, 0x01, 0xa1, 'x'},
		"unknown field": append([]byte{0x82, 0xa3, 'z', 'z', 'z', 0x01}, 0xa2, 'i', 'd', 0x05),
		"truncated":     {0x82, 0xa2, 'i', 'd', 0x05, 0xa4, 'n', 'a'},
		"wrong code":    {0x82, 0xa2, 'i', 'd', 0x05, 0xa4, 'n', 'a', 'm', 'e', 0xc3},
		"empty":         {},
	} {
		seed := row{ID: 1, Name: "seed", Active: true}
		want, got := seed, seed
		werr := libraryUnmarshal(data, &want)
		gerr := Unmarshal(data, &got)
		if werr == nil {
			assert.NoError(t, gerr, name)
		} else {
			assert.EqualError(t, gerr, werr.Error(), name)
		}
		assert.Equal(t, want, got, name)
	}
	var s withBytes
	data, err := Marshal(withBytes{B: []byte("x")})
	require.NoError(t, err)
	require.NoError(t, Unmarshal(data, &s), "a type that is not flat is the library's")
	assert.Equal(t, []byte("x"), s.B)
	assert.Error(t, Unmarshal[row](data, nil), "a nil pointer is refused by the library")
}

// TestFailedDecodesRetainNothing: inputs that declare a longer string than they hold
// (here an unknown field's bin32 of 4 GiB) must not grow a pooled decoder: the library's
// decoder keeps its read buffer, which each such input grows by a megabyte or more.
func TestFailedDecodesRetainNothing(t *testing.T) {
	data := []byte{0x81, 0xa1, 'z', codeBin32, 0xff, 0xff, 0xff, 0xff, 0x00}
	for range 300 {
		var r row
		require.Error(t, Unmarshal(data, &r))
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	assert.Less(t, ms.HeapAlloc, uint64(100<<20), "heap after 300 failed decodes and a GC")
}

// parityInputs are encodings of allKinds and row beside the library's own: every integer
// code for a number, nil for every kind, bin for a string, a float32 for a float64, keys out
// of order and repeated, and what the library refuses or skips.
func parityInputs(t testing.TB) [][]byte {
	enc := func(v any) []byte {
		b, err := Marshal(v)
		require.NoError(t, err)
		return b
	}
	m := func(kv ...any) []byte { // a map written key by key with the library's encoder
		return enc(msgpackMap(kv))
	}
	u16 := binary.BigEndian.AppendUint16
	return [][]byte{
		enc(allKinds{B: true, I: 1 << 40, I8: -3, I16: -300, I32: 1 << 20, I64: -1 << 50, U: 1 << 33, U8: 200, U16: 60000,
			U32: 1 << 31, U64: 1 << 63, F32: -0.5, F64: math.Inf(1), S: "s", L: "l", Own: -1}),
		enc(allKinds{}),
		enc(row{ID: 1, Name: "n", Email: "e", Balance: 2}),
		enc(stamped{ID: 1, Created: time.Unix(1_700_000_000, 0), Updated: time.Unix(1_700_000_000, 5), Note: "x"}),
		enc(stamped{Created: time.Unix(-5, 1), Updated: time.Unix(1<<40, 0)}),
		m("created", nil), // the library panics
		m("updated", "2026-01-02T03:04:05Z"),
		m("created", []any{1, 2}),
		{0x81, 0xa7, 'c', 'r', 'e', 'a', 't', 'e', 'd', codeFixExt4, 13, 0, 0, 0, 1},
		{0x81, 0xa7, 'c', 'r', 'e', 'a', 't', 'e', 'd', codeExt8, 4, timeExt, 0, 0, 0, 1},
		{0x81, 0xa7, 'c', 'r', 'e', 'a', 't', 'e', 'd', codeExt8, 12, timeExt, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 9},
		m("i8", 1000, "u8", -1, "u", -5, "i", uint64(math.MaxUint64), "f32", 7, "f64", float32(1.5), "own", 3.5),
		m("s", nil, "B", nil, "i", nil, "f64", nil, "f32", nil, "l", []byte("bin")),
		m("f32", 1e300, "B", 1),
		m("id", 5, "id", 6, "name", "a", "name", "b"),
		m("unknown", map[string]any{"x": []any{1, "y"}}, "id", 1),
		m("i32", "not a number"),
		append([]byte{0xde}, u16(nil, 2)...),
		append(append([]byte{0xde}, u16(nil, 1)...), 0xa2, 'i', 'd', 0xd1, 0x80, 0x00),
		{0xdf, 0, 0, 0, 1, 0xd9, 2, 'i', 'd', 0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		{0x81, 0xc4, 2, 'i', 'd', 0x07},
		{0x81, 0xc0, 0x07},
		{0x81, 0xa1, 's', 0xdb, 0xff, 0xff, 0xff, 0xff},
		{0x80, 0xc3},
		{codeNil}, {0x90}, {0x92, 1, 2}, {}, {0x8f},
	}
}

// msgpackMap is a map encoded with its keys in the order given (repeats kept).
type msgpackMap []any

func (m msgpackMap) EncodeMsgpack(e *msgpack.Encoder) error {
	if err := e.EncodeMapLen(len(m) / 2); err != nil {
		return err
	}
	for _, v := range m {
		if err := e.Encode(v); err != nil {
			return err
		}
	}
	return nil
}

// FuzzParity: on any input, Unmarshal gives what the library gives, into a value that held
// something before: the same error, the same value (floats compared bit for bit).
func FuzzParity(f *testing.F) {
	for _, in := range parityInputs(f) {
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkParity(t, data, allKinds{B: true, I: 1, S: "before", F64: 2, L: "x", Skipped: "kept", hidden: 3})
		checkParity(t, data, row{ID: 9, Name: "before"})
		checkParity(t, data, stamped{ID: 3, Created: time.Unix(77, 0), Note: "before"})
	})
}

func checkParity[V any](t *testing.T, data []byte, seed V) {
	want, got := seed, seed
	wpanic, werr := decodeRecovering(libraryUnmarshal, data, &want)
	gpanic, gerr := decodeRecovering(func(d []byte, v any) error { return Unmarshal(d, v.(*V)) }, data, &got)
	require.Equal(t, wpanic, gpanic, "input %x: panics", data)
	if wpanic != nil {
		return // the library panicked, and so did Unmarshal, by handing it the input
	}
	if werr == nil {
		require.NoError(t, gerr, "input %x", data)
	} else {
		require.EqualError(t, gerr, werr.Error(), "input %x", data)
	}
	require.True(t, sameBits(reflect.ValueOf(want), reflect.ValueOf(got)), "input %x: library %+v, Unmarshal %+v", data, want, got)
}

// decodeRecovering runs decode, turning a panic into its value.
func decodeRecovering(decode func([]byte, any) error, data []byte, v any) (panicked any, err error) {
	defer func() { panicked = recover() }()
	return nil, decode(data, v)
}

// sameBits is reflect.DeepEqual for flat structs with floats compared bit for bit.
func sameBits(a, b reflect.Value) bool {
	for i := range a.NumField() {
		x, y := a.Field(i), b.Field(i)
		switch x.Kind() {
		case reflect.Float32, reflect.Float64:
			if math.Float64bits(x.Float()) != math.Float64bits(y.Float()) {
				return false
			}
		case reflect.String:
			if x.String() != y.String() {
				return false
			}
		case reflect.Bool:
			if x.Bool() != y.Bool() {
				return false
			}
		case reflect.Struct: // a time.Time: its wall clock, monotonic part and location
			if x.Interface() != y.Interface() {
				return false
			}
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			if x.Int() != y.Int() {
				return false
			}
		default:
			if x.Uint() != y.Uint() {
				return false
			}
		}
	}
	return true
}

func TestParityInputs(t *testing.T) {
	for _, in := range parityInputs(t) {
		checkParity(t, in, allKinds{B: true, I: 1, S: "before"})
		checkParity(t, in, row{ID: 9, Name: "before"})
		checkParity(t, in, stamped{ID: 3, Created: time.Unix(77, 0), Note: "before"})
	}
}

// BenchmarkUnmarshal: a row (the benchmarks' shape) by Unmarshal and by the library alone.
func BenchmarkUnmarshal(b *testing.B) {
	data, err := Marshal(row{ID: 123456, Name: "Customer 123456", Email: "customer123456@example.com", Balance: 4200, Active: true})
	require.NoError(b, err)
	for _, side := range []struct {
		name   string
		decode func([]byte, *row) error
	}{{"flat", Unmarshal[row]}, {"library", func(d []byte, r *row) error { return libraryUnmarshal(d, r) }}} {
		b.Run(side.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var r row
				if err := side.decode(data, &r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
