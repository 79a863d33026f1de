package cache

import (
	"unsafe"

	"github.com/echocache/echocache/internal/jsonfmt"
	"github.com/echocache/echocache/internal/panics"
)

// Codec encodes values for L2. L1 keeps values decoded, so a codec runs on fills and L2
// reads only, never on an L1 hit. Implementations must be safe for concurrent use; Unmarshal
// must not keep data after it returns. A Marshal that panics fails the read with a
// *[PanicError], and the fill gives its lease back, so no process waits on it; an Unmarshal
// that panics makes the row unreadable, and the read refills it.
type Codec[V any] interface {
	Marshal(v V) ([]byte, error)
	Unmarshal(data []byte, v *V) error
}

// JSON is the default [Codec]: the encoding/json format, byte for byte (struct tags,
// json.Marshaler and json.Unmarshaler included), written and read by a decoder several times
// as fast as encoding/json's that accepts what it accepts (but for a time.Time whose date and
// time are joined by W, which it reads as if joined by T); decode errors are worded by that
// library. A time.Time that json.Marshal refuses (a year outside 0 to 9999) fails Marshal with
// json.Marshal's error, so the fill fails rather than write a row no read could decode.
type JSON[V any] struct{}

// Marshal encodes v as json.Marshal does.
func (JSON[V]) Marshal(v V) ([]byte, error) { return jsonfmt.Marshal(v) }

// Unmarshal decodes data as json.Unmarshal does.
func (JSON[V]) Unmarshal(data []byte, v *V) error { return jsonfmt.Unmarshal(data, v) }

// UnmarshalString decodes a row payload without copying it: the decoder neither keeps nor
// changes its input. Codecs without this method get a copy.
func (JSON[V]) UnmarshalString(data string, v *V) error {
	return jsonfmt.Unmarshal(unsafe.Slice(unsafe.StringData(data), len(data)), v)
}

// stringDecoder is a Codec that can decode straight from the bytes the client read.
type stringDecoder[V any] interface {
	UnmarshalString(data string, v *V) error
}

// decode decodes a row payload with the table's codec. A codec that panics reports the panic
// as its error (a *[PanicError]): the row is unreadable, counted and refilled like any row
// that does not decode, and the read goes on.
func decode[V any](c Codec[V], payload string, v *V) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = panics.New("cache: codec", p)
		}
	}()
	if d, ok := c.(stringDecoder[V]); ok {
		return d.UnmarshalString(payload, v)
	}
	return c.Unmarshal([]byte(payload), v)
}
