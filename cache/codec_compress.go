package cache

import (
	"bytes"
	"compress/flate"
	"errors"
	"fmt"
	"io"
	"sync"
	"unsafe"
)

// compressed wraps a table's codec when [TableOpts].CompressAbove is set: a payload of at
// least above bytes is compressed with DEFLATE (compress/flate at BestSpeed). Every payload
// then opens with one byte saying which: 0 for as the codec wrote it, 1 for DEFLATE. A row
// written without the wrapper (or with another marker) does not decode, and is refilled.
//
// A compressed payload inflates to at most [MaxInflatedPayload] bytes: a payload the codec
// wrote longer than that is written plain (the marker 0), and a compressed one that inflates
// past it is refused with an error naming the bound, so it does not decode and is refilled
// like any corrupt row, once the reader has inflated one byte past the bound (its buffer
// grown to about twice that at most).
type compressed[V any] struct {
	inner Codec[V]
	above int
	limit int // the bound on an inflated payload; 0 for MaxInflatedPayload
}

// MaxInflatedPayload bounds the size a compressed payload (see [TableOpts].CompressAbove)
// inflates to, 64 MiB. Without a bound, DEFLATE alone would let a corrupt or hostile row
// make every reader allocate up to about a thousand times its size. Payloads the codec
// writes longer than this are stored uncompressed instead, so a value the table wrote never
// meets the bound; a compressed payload that inflates past it does not decode: it is counted
// in [Stats].CorruptRows and refilled.
const MaxInflatedPayload = 64 << 20

func (c compressed[V]) bound() int {
	if c.limit > 0 {
		return c.limit
	}
	return MaxInflatedPayload
}

const (
	payloadPlain   = 0
	payloadDeflate = 1
)

var errPayloadMarker = errors.New("cache: payload has no compression marker")

var flateWriters = sync.Pool{New: func() any {
	w, _ := flate.NewWriter(nil, flate.BestSpeed) // BestSpeed is a valid level: no error
	return w
}}

var flateReaders = sync.Pool{New: func() any { return flate.NewReader(nil) }}

func (c compressed[V]) Marshal(v V) ([]byte, error) {
	p, err := c.inner.Marshal(v)
	if err != nil {
		return nil, err
	}
	if len(p) < c.above || len(p) > c.bound() { // past the bound, a reader would refuse it
		return append([]byte{payloadPlain}, p...), nil
	}
	var buf bytes.Buffer
	buf.Grow(len(p)/2 + 16)
	buf.WriteByte(payloadDeflate)
	w := flateWriters.Get().(*flate.Writer)
	defer flateWriters.Put(w)
	w.Reset(&buf)
	if _, err := w.Write(p); err != nil {
		return nil, fmt.Errorf("cache: compressing a payload: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("cache: compressing a payload: %w", err)
	}
	return buf.Bytes(), nil
}

func (c compressed[V]) Unmarshal(data []byte, v *V) error {
	return c.UnmarshalString(unsafe.String(unsafe.SliceData(data), len(data)), v)
}

// UnmarshalString decodes a plain payload without a copy when the inner codec can, and
// inflates a compressed one first.
func (c compressed[V]) UnmarshalString(data string, v *V) error {
	if data == "" {
		return errPayloadMarker
	}
	switch data[0] {
	case payloadPlain:
		return decode(c.inner, data[1:], v)
	case payloadDeflate:
		r := flateReaders.Get().(io.ReadCloser)
		defer flateReaders.Put(r)
		if err := r.(flate.Resetter).Reset(stringReader(data[1:]), nil); err != nil {
			return err
		}
		limit := c.bound()
		p, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
		if err != nil {
			return fmt.Errorf("cache: inflating a payload: %w", err)
		}
		if len(p) > limit {
			return fmt.Errorf("cache: inflating a payload: it inflates past the bound of %d bytes (MaxInflatedPayload)", limit)
		}
		return c.inner.Unmarshal(p, v)
	}
	return errPayloadMarker
}

// stringReader reads a string as the flate reader wants (it needs ReadByte).
func stringReader(s string) *bytes.Reader {
	return bytes.NewReader(unsafe.Slice(unsafe.StringData(s), len(s)))
}
