// Package msgpackfmt is the MessagePack of the cache's Msgpack codec ([cache.Msgpack]):
// github.com/vmihailenco/msgpack/v5 writes every value and reads every value but one kind,
// which a decoder of this package reads, with the library's result, about three times as
// fast (BenchmarkUnmarshal): a flat struct, the shape of most rows.
//
// A flat struct is a struct whose fields (the exported ones the library names: by their
// msgpack tag, else their json tag, else their Go name; "-" leaves one out) are all of kinds
// bool, int, int8 to int64, uint, uint8 to uint64, float32, float64 or string, or of type
// time.Time (the library's timestamp extension), with no tag option the library reads on
// decode (intern, alias, inline), no embedded field, and neither the struct nor a field's
// type (time.Time aside) a decoder of its own (msgpack.CustomDecoder, msgpack.Unmarshaler,
// encoding.BinaryUnmarshaler, encoding.TextUnmarshaler). Whether a type is flat is decided
// once per type and then checked against the library itself: a probe value, every field
// set, is encoded by the library, which must write the names this package gave the fields,
// in their order, and both decoders must read the probe back. A type that fails any of it
// is read by the library alone.
//
// The decoder reads what the library writes for such a struct (a map of its field names to
// their values) and what the library accepts in its place for every field kind (any integer
// encoding for a number, nil for a zero, bin for a string, a float for a float32 or
// float64; a time only in the three forms the library writes). At the first byte it does not
// read as the library would (an unknown field, which the library skips; nil or an array for
// the whole struct; a truncated input; a code the field's kind refuses; nil for a time, on
// which the library panics), it restores the value and hands the input to the library, so
// the result, an error or a panic included, is always the library's. FuzzParity checks it.
//
// [cache.Msgpack]: https://pkg.go.dev/github.com/echocache/echocache/cache#Msgpack
package msgpackfmt

import (
	"bytes"
	"sync"
	"unsafe"

	"github.com/vmihailenco/msgpack/v5"
)

// Tag is the struct tag the library falls back to when a field has no msgpack tag: a type
// tagged for JSON keeps its field names.
const Tag = "json"

type encoder struct {
	enc *msgpack.Encoder
	buf bytes.Buffer
}

type decoder struct {
	dec *msgpack.Decoder
	r   bytes.Reader
}

var (
	encoders = sync.Pool{New: func() any {
		e := &encoder{}
		e.enc = msgpack.NewEncoder(&e.buf)
		return e
	}}
	decoders = sync.Pool{New: func() any { return &decoder{dec: msgpack.NewDecoder(nil)} }}
)

// Marshal encodes v with the library, struct fields named as [Tag] says.
func Marshal(v any) ([]byte, error) {
	e := encoders.Get().(*encoder)
	defer encoders.Put(e)
	e.buf.Reset()
	e.enc.Reset(&e.buf)
	e.enc.SetCustomStructTag(Tag)
	if err := e.enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.Clone(e.buf.Bytes()), nil
}

// Unmarshal decodes data into v as the library does, struct fields named as [Tag] says:
// by the flat decoder when V is a flat struct, else (and whenever the flat decoder stops) by
// the library. It neither keeps nor changes data (strings are copied out of it), so data may
// alias a string.
func Unmarshal[V any](data []byte, v *V) error {
	if p := planFor[V](); p != nil && v != nil {
		saved := *v
		if p.decode(data, unsafe.Pointer(v)) {
			return nil
		}
		*v = saved
	}
	return libraryUnmarshal(data, v)
}

// libraryUnmarshal is Unmarshal by the library alone. Its decoders are pooled, but one that
// failed is dropped: the library's decoder keeps the buffer it reads strings into, and an
// input declaring a longer string than it holds grows that buffer by a megabyte or more
// before the read fails, so a pooled decoder fed such inputs over and over would grow
// without bound (FuzzParity found it). A decode that succeeds read no more than its input.
func libraryUnmarshal(data []byte, v any) error {
	d := decoders.Get().(*decoder)
	d.r.Reset(data)
	d.dec.Reset(&d.r)
	d.dec.SetCustomStructTag(Tag)
	err := d.dec.Decode(v)
	d.r.Reset(nil)
	d.dec.Reset(nil)
	if err == nil {
		decoders.Put(d)
	}
	return err
}
