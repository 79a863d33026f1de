package cache

import (
	"bytes"
	"sync"
	"unsafe"

	"github.com/vmihailenco/msgpack/v5"
)

// Msgpack is a [Codec] over MessagePack (github.com/vmihailenco/msgpack/v5): smaller rows
// than JSON, and decoding allocates little more than the value's own strings and slices.
// Struct fields are named by
// their msgpack tag, else their json tag, else their Go name, so a type tagged for JSON
// keeps its field names. Set it with [TableOpts].Codec; rows of one table must all be
// written by one codec (a row another codec wrote does not decode: it is refilled).
type Msgpack[V any] struct{}

// msgpackDecoder is a pooled decoder with the reader it decodes from.
type msgpackDecoder struct {
	dec *msgpack.Decoder
	r   bytes.Reader
}

var (
	msgpackDecoders = sync.Pool{New: func() any { return &msgpackDecoder{dec: msgpack.NewDecoder(nil)} }}
	msgpackEncoders = sync.Pool{New: func() any {
		e := &msgpackEncoder{}
		e.enc = msgpack.NewEncoder(&e.buf)
		return e
	}}
)

type msgpackEncoder struct {
	enc *msgpack.Encoder
	buf bytes.Buffer
}

// Marshal encodes v.
func (Msgpack[V]) Marshal(v V) ([]byte, error) {
	e := msgpackEncoders.Get().(*msgpackEncoder)
	defer msgpackEncoders.Put(e)
	e.buf.Reset()
	e.enc.Reset(&e.buf)
	e.enc.SetCustomStructTag("json")
	if err := e.enc.Encode(&v); err != nil {
		return nil, err
	}
	return bytes.Clone(e.buf.Bytes()), nil
}

// Unmarshal decodes data into v.
func (Msgpack[V]) Unmarshal(data []byte, v *V) error {
	d := msgpackDecoders.Get().(*msgpackDecoder)
	defer msgpackDecoders.Put(d)
	d.r.Reset(data)
	d.dec.Reset(&d.r)
	d.dec.SetCustomStructTag("json")
	err := d.dec.Decode(v)
	d.r.Reset(nil)
	d.dec.Reset(nil)
	return err
}

// UnmarshalString decodes a row payload without copying it: the decoder copies what it
// keeps (strings, byte slices) and never writes to its input.
func (m Msgpack[V]) UnmarshalString(data string, v *V) error {
	return m.Unmarshal(unsafe.Slice(unsafe.StringData(data), len(data)), v)
}
