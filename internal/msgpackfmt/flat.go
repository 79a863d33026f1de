package msgpackfmt

import (
	"encoding/binary"
	"math"
	"time"
	"unsafe"
)

// The MessagePack codes the flat decoder reads.
const (
	codeNil     = 0xc0
	codeFalse   = 0xc2
	codeTrue    = 0xc3
	codeBin8    = 0xc4
	codeBin16   = 0xc5
	codeBin32   = 0xc6
	codeFloat   = 0xca
	codeDouble  = 0xcb
	codeUint8   = 0xcc
	codeUint16  = 0xcd
	codeUint32  = 0xce
	codeUint64  = 0xcf
	codeInt8    = 0xd0
	codeInt16   = 0xd1
	codeInt32   = 0xd2
	codeInt64   = 0xd3
	codeStr8    = 0xd9
	codeStr16   = 0xda
	codeStr32   = 0xdb
	codeMap16   = 0xde
	codeMap32   = 0xdf
	codeExt8    = 0xc7
	codeFixExt4 = 0xd6
	codeFixExt8 = 0xd7
	timeExt     = 0xff // the timestamp extension's type, -1
)

// decode reads data, a map of field names to values, into the struct at v. It reports
// false at the first byte it does not read as the library would; v may then hold part of
// the input, which the caller undoes.
func (p *plan) decode(data []byte, v unsafe.Pointer) bool {
	n, i, ok := mapLen(data)
	if !ok {
		return false
	}
	next := 0 // the field the library writes after the last one read
	for ; n > 0; n-- {
		var name []byte
		if name, i, ok = bytesAt(data, i); !ok {
			return false
		}
		f := p.lookup(name, &next)
		if f == nil {
			return false
		}
		if i, ok = f.decode(data, i, unsafe.Add(v, f.off)); !ok {
			return false
		}
	}
	return true
}

// lookup finds the field named name, trying first the one after the last found (the only
// one a strict plan tries).
func (p *plan) lookup(name []byte, next *int) *field {
	if k := *next; k < len(p.fields) && string(name) == p.fields[k].name {
		*next = k + 1
		return &p.fields[k]
	}
	if p.strict {
		return nil
	}
	for k := range p.fields {
		if string(name) == p.fields[k].name {
			*next = k + 1
			return &p.fields[k]
		}
	}
	return nil
}

// mapLen reads a map header (not nil: the library zeroes the struct then, which it does
// itself): the map's length and where its first key starts.
func mapLen(b []byte) (n, i int, ok bool) {
	if len(b) == 0 {
		return 0, 0, false
	}
	switch c := b[0]; {
	case c >= 0x80 && c <= 0x8f:
		return int(c & 0x0f), 1, true
	case c == codeMap16 && len(b) >= 3:
		return int(binary.BigEndian.Uint16(b[1:])), 3, true
	case c == codeMap32 && len(b) >= 5:
		return int(binary.BigEndian.Uint32(b[1:])), 5, true
	}
	return 0, 0, false
}

// bytesAt reads a str or a bin at b[i] (the library reads either as a string): its bytes,
// aliasing b, and the index after it. A nil is refused: as a field name the library reads
// it as "", which names no field of a plan.
func bytesAt(b []byte, i int) (s []byte, next int, ok bool) {
	if i >= len(b) {
		return nil, 0, false
	}
	c := b[i]
	n, h := 0, 1
	switch {
	case c >= 0xa0 && c <= 0xbf:
		n = int(c & 0x1f)
	case (c == codeStr8 || c == codeBin8) && i+2 <= len(b):
		n, h = int(b[i+1]), 2
	case (c == codeStr16 || c == codeBin16) && i+3 <= len(b):
		n, h = int(binary.BigEndian.Uint16(b[i+1:])), 3
	case (c == codeStr32 || c == codeBin32) && i+5 <= len(b):
		n, h = int(binary.BigEndian.Uint32(b[i+1:])), 5
	default:
		return nil, 0, false
	}
	start := i + h
	if n > len(b)-start {
		return nil, 0, false
	}
	return b[start : start+n], start + n, true
}

// intAt reads an integer at b[i] as the library reads one for an integer field: nil is 0,
// and every integer code is read as an int64 (a uint64 past its range wraps, as the
// library's does).
func intAt(b []byte, i int) (x int64, next int, ok bool) {
	if i >= len(b) {
		return 0, 0, false
	}
	c := b[i]
	if c <= 0x7f || c >= 0xe0 { // a fixnum
		return int64(int8(c)), i + 1, true
	}
	size := 0
	switch c {
	case codeNil:
		return 0, i + 1, true
	case codeUint8, codeInt8:
		size = 1
	case codeUint16, codeInt16:
		size = 2
	case codeUint32, codeInt32:
		size = 4
	case codeUint64, codeInt64:
		size = 8
	default:
		return 0, 0, false
	}
	if size > len(b)-i-1 {
		return 0, 0, false
	}
	d := b[i+1:]
	switch c {
	case codeUint8:
		x = int64(d[0])
	case codeInt8:
		x = int64(int8(d[0]))
	case codeUint16:
		x = int64(binary.BigEndian.Uint16(d))
	case codeInt16:
		x = int64(int16(binary.BigEndian.Uint16(d)))
	case codeUint32:
		x = int64(binary.BigEndian.Uint32(d))
	case codeInt32:
		x = int64(int32(binary.BigEndian.Uint32(d)))
	default:
		x = int64(binary.BigEndian.Uint64(d))
	}
	return x, i + 1 + size, true
}

// decode reads the field's value at b[i] into p, as the library's decoder for the field's
// kind does, and returns the index after it.
func (f *field) decode(b []byte, i int, p unsafe.Pointer) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch f.kind {
	case kindString:
		if b[i] == codeNil {
			*(*string)(p) = ""
			return i + 1, true
		}
		s, next, ok := bytesAt(b, i)
		if ok {
			*(*string)(p) = string(s)
		}
		return next, ok
	case kindBool:
		switch b[i] {
		case codeNil, codeFalse:
			*(*bool)(p) = false
		case codeTrue:
			*(*bool)(p) = true
		default:
			return 0, false
		}
		return i + 1, true
	case kindFloat32, kindFloat64:
		return f.decodeFloat(b, i, p)
	case kindTime:
		return decodeTime(b, i, p)
	}
	x, next, ok := intAt(b, i)
	if !ok {
		return 0, false
	}
	switch f.kind { // stored as reflect's SetInt and SetUint store: truncated to the field
	case kindInt:
		*(*int)(p) = int(x)
	case kindInt8:
		*(*int8)(p) = int8(x)
	case kindInt16:
		*(*int16)(p) = int16(x)
	case kindInt32:
		*(*int32)(p) = int32(x)
	case kindInt64:
		*(*int64)(p) = x
	case kindUint:
		*(*uint)(p) = uint(x)
	case kindUint8:
		*(*uint8)(p) = uint8(x)
	case kindUint16:
		*(*uint16)(p) = uint16(x)
	case kindUint32:
		*(*uint32)(p) = uint32(x)
	case kindUint64:
		*(*uint64)(p) = uint64(x)
	}
	return next, true
}

// decodeFloat reads a float field's value at b[i] as the library does: a float (widened for
// a float64 field), a double for a float64 field only, or any integer, converted.
func (f *field) decodeFloat(b []byte, i int, p unsafe.Pointer) (int, bool) {
	wide := f.kind == kindFloat64
	switch {
	case b[i] == codeFloat && len(b)-i >= 5:
		v := math.Float32frombits(binary.BigEndian.Uint32(b[i+1:]))
		if wide {
			*(*float64)(p) = float64(v)
		} else {
			*(*float32)(p) = v
		}
		return i + 5, true
	case b[i] == codeDouble && wide && len(b)-i >= 9:
		*(*float64)(p) = math.Float64frombits(binary.BigEndian.Uint64(b[i+1:]))
		return i + 9, true
	}
	x, next, ok := intAt(b, i) // refuses a float or a double it did not read above
	if ok {
		if wide {
			*(*float64)(p) = float64(x)
		} else {
			*(*float32)(p) = float32(x)
		}
	}
	return next, ok
}

// decodeTime reads a time.Time at b[i] as the library does for a time.Time field: the
// timestamp extension (type -1) in the forms the library writes (4 bytes of seconds, 8 bytes
// of nanoseconds and seconds, 12 bytes of nanoseconds then seconds) is time.Unix of it, the
// zero time in UTC. Any other form is left to the library: the few more it reads, and nil,
// on which the library (v5.4.1) panics.
func decodeTime(b []byte, i int, p unsafe.Pointer) (int, bool) {
	var sec, nsec int64
	next := 0
	switch {
	case b[i] == codeFixExt4 && len(b)-i >= 6 && b[i+1] == timeExt:
		sec, next = int64(binary.BigEndian.Uint32(b[i+2:])), i+6
	case b[i] == codeFixExt8 && len(b)-i >= 10 && b[i+1] == timeExt:
		v := binary.BigEndian.Uint64(b[i+2:])
		sec, nsec, next = int64(v&0x3ffffffff), int64(v>>34), i+10
	case b[i] == codeExt8 && len(b)-i >= 15 && b[i+1] == 12 && b[i+2] == timeExt:
		nsec = int64(binary.BigEndian.Uint32(b[i+3:]))
		sec, next = int64(binary.BigEndian.Uint64(b[i+7:])), i+15
	default:
		return 0, false
	}
	t := time.Unix(sec, nsec)
	if t.IsZero() {
		t = t.UTC()
	}
	*(*time.Time)(p) = t
	return next, true
}
