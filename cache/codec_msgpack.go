package cache

import (
	"unsafe"

	"github.com/echocache/echocache/internal/msgpackfmt"
)

// Msgpack is a [Codec] over MessagePack, written and read as github.com/vmihailenco/msgpack/v5
// writes and reads it: smaller rows than JSON, and decoding allocates little more than the
// value's own strings and slices. Struct fields are named by their msgpack tag, else their json
// tag, else their Go name, so a type tagged for JSON keeps its field names. A flat struct
// (fields of bool, integer, float and string kinds or time.Time, none embedded, none decoding
// itself otherwise) is read by a decoder of the module's own with the library's result, about
// three times as fast as the library (internal/msgpackfmt); every other type, and every input
// that decoder does not read as the library would, is read by the library. Set it with
// [TableOpts].Codec; rows of one table must all be written by one codec (a row another codec
// wrote does not decode: it is refilled).
type Msgpack[V any] struct{}

// Marshal encodes v.
func (Msgpack[V]) Marshal(v V) ([]byte, error) { return msgpackfmt.Marshal(&v) }

// Unmarshal decodes data into v.
func (Msgpack[V]) Unmarshal(data []byte, v *V) error { return msgpackfmt.Unmarshal(data, v) }

// UnmarshalString decodes a row payload without copying it: the decoders copy what they
// keep (strings, byte slices) and never write to their input.
func (Msgpack[V]) UnmarshalString(data string, v *V) error {
	return msgpackfmt.Unmarshal(unsafe.Slice(unsafe.StringData(data), len(data)), v)
}
