package cache

import (
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fuzzFlat is a flat struct (the msgpack codec's own decoder reads it); fuzzNested is not.
type (
	fuzzFlat struct {
		ID    int64     `json:"id"`
		U     uint64    `json:"u"`
		Name  string    `json:"name"`
		F     float64   `json:"f"`
		F32   float32   `json:"f32"`
		On    bool      `json:"on"`
		At    time.Time `json:"at"`
		Small int8      `json:"small"`
	}
	fuzzNested struct {
		Tags  []string          `json:"tags"`
		Attrs map[string]int64  `json:"attrs"`
		Inner *fuzzFlat         `json:"inner"`
		Raw   []byte            `json:"raw"`
		Any   map[string]string `json:"any,omitempty"`
	}
)

// fuzzCodecs are the codecs a table can have, each over both shapes, as decode functions
// that call the codec directly (not through decode, which turns panics into errors).
func fuzzCodecs() map[string]func(data []byte) error {
	out := map[string]func([]byte) error{}
	add := func(name string, flat Codec[fuzzFlat], nested Codec[fuzzNested]) {
		out[name+"/flat"] = func(d []byte) error {
			var v fuzzFlat
			if err := flat.Unmarshal(d, &v); err != nil {
				return err
			}
			return flat.(stringDecoder[fuzzFlat]).UnmarshalString(string(d), &v)
		}
		out[name+"/nested"] = func(d []byte) error {
			var v fuzzNested
			return nested.Unmarshal(d, &v)
		}
	}
	add("json", JSON[fuzzFlat]{}, JSON[fuzzNested]{})
	add("msgpack", Msgpack[fuzzFlat]{}, Msgpack[fuzzNested]{})
	add("json-compressed", compressed[fuzzFlat]{inner: JSON[fuzzFlat]{}, above: 1, limit: 1 << 20},
		compressed[fuzzNested]{inner: JSON[fuzzNested]{}, above: 1, limit: 1 << 20})
	add("msgpack-compressed", compressed[fuzzFlat]{inner: Msgpack[fuzzFlat]{}, above: 1, limit: 1 << 20},
		compressed[fuzzNested]{inner: Msgpack[fuzzNested]{}, above: 1, limit: 1 << 20})
	return out
}

// FuzzCodecDecode: no codec panics on any input (a corrupt or foreign row), whatever it
// returns. The one panic allowed is the msgpack library's on nil for a time.Time (see
// TestCodecPanicRefills), which decode turns into an error.
func FuzzCodecDecode(f *testing.F) {
	for _, v := range []fuzzFlat{{}, {ID: -1, U: math.MaxUint64, Name: "n", F: 1.5, On: true, At: time.Unix(1_700_000_000, 5)}} {
		for _, c := range []Codec[fuzzFlat]{JSON[fuzzFlat]{}, Msgpack[fuzzFlat]{}, compressed[fuzzFlat]{inner: Msgpack[fuzzFlat]{}, above: 1}} {
			p, err := c.Marshal(v)
			require.NoError(f, err)
			f.Add(p)
		}
	}
	n := fuzzNested{Tags: []string{}, Attrs: map[string]int64{"a": 1}, Inner: &fuzzFlat{Name: "x"}, Raw: []byte{0, 1}}
	for _, c := range []Codec[fuzzNested]{JSON[fuzzNested]{}, Msgpack[fuzzNested]{}, compressed[fuzzNested]{inner: JSON[fuzzNested]{}, above: 1}} {
		p, err := c.Marshal(n)
		require.NoError(f, err)
		f.Add(p)
	}
	f.Add([]byte{})
	f.Add([]byte{0x81, 0xa2, 'a', 't', 0xc0})               // {"at": nil}: the library panics
	f.Add([]byte{payloadPlain, 0x81, 0xa2, 'a', 't', 0xc0}) // and so through the wrapper
	f.Add([]byte{payloadDeflate})
	f.Add([]byte{payloadDeflate, 0x01, 0x00, 0x00, 0xff, 0xff})
	codecs := fuzzCodecs()
	f.Fuzz(func(t *testing.T, data []byte) {
		for name, dec := range codecs {
			func() {
				defer func() {
					if p := recover(); p != nil && !nilTimePanic(p) {
						t.Fatalf("%s panicked on %x: %v", name, data, p)
					}
				}()
				_ = dec(data)
			}()
		}
	})
}

// nilTimePanic reports whether p is the msgpack library's panic on nil for a time.Time
// (v5.4.1 calls IsNil on the struct).
func nilTimePanic(p any) bool {
	ve, ok := p.(*reflect.ValueError)
	return ok && ve.Method == "reflect.Value.IsNil" && ve.Kind == reflect.Struct
}
