package msgpackfmt

import (
	"encoding"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// kind is how a field's bytes are stored: its Go kind, named types included.
type kind uint8

const (
	kindBool kind = iota + 1
	kindInt
	kindInt8
	kindInt16
	kindInt32
	kindInt64
	kindUint
	kindUint8
	kindUint16
	kindUint32
	kindUint64
	kindFloat32
	kindFloat64
	kindString
	kindTime // time.Time, which the library reads as its timestamp extension
)

// timeType is time.Time, the one struct type a flat struct's field may have.
var timeType = reflect.TypeFor[time.Time]()

var kinds = map[reflect.Kind]kind{
	reflect.Bool: kindBool, reflect.Int: kindInt, reflect.Int8: kindInt8, reflect.Int16: kindInt16,
	reflect.Int32: kindInt32, reflect.Int64: kindInt64, reflect.Uint: kindUint, reflect.Uint8: kindUint8,
	reflect.Uint16: kindUint16, reflect.Uint32: kindUint32, reflect.Uint64: kindUint64,
	reflect.Float32: kindFloat32, reflect.Float64: kindFloat64, reflect.String: kindString,
}

// field is one field of a flat struct: the name the library gives it, where it lies in the
// struct and how it is stored.
type field struct {
	name  string
	index int // in the struct's fields
	off   uintptr
	kind  kind
}

// plan is how the flat decoder reads one struct type: its fields in declaration order,
// which is the order the library writes them in.
type plan struct {
	fields []field
	strict bool // fields must come in order, each once: how the library writes them
}

// plans holds, per type, its *plan, or a nil *plan for a type the library reads alone.
var plans sync.Map

// planFor returns V's plan, nil when V is not a flat struct.
func planFor[V any]() *plan {
	t := reflect.TypeFor[V]()
	if p, ok := plans.Load(t); ok {
		return p.(*plan)
	}
	p := build(t)
	if p != nil && !p.agrees(t) {
		p = nil
	}
	plans.Store(t, p)
	return p
}

// selfCodecTypes are the interfaces through which a type encodes or decodes itself in the
// library.
var selfCodecTypes = []reflect.Type{
	reflect.TypeFor[msgpack.CustomDecoder](), reflect.TypeFor[msgpack.Unmarshaler](),
	reflect.TypeFor[encoding.BinaryUnmarshaler](), reflect.TypeFor[encoding.TextUnmarshaler](),
	reflect.TypeFor[msgpack.CustomEncoder](), reflect.TypeFor[msgpack.Marshaler](),
	reflect.TypeFor[encoding.BinaryMarshaler](), reflect.TypeFor[encoding.TextMarshaler](),
}

// ownCodec reports whether t or *t encodes or decodes itself in the library.
func ownCodec(t reflect.Type) bool {
	for _, it := range selfCodecTypes {
		if t.Implements(it) || reflect.PointerTo(t).Implements(it) {
			return true
		}
	}
	return false
}

// build returns t's plan when t looks flat by its declaration, else nil.
func build(t reflect.Type) *plan {
	if t.Kind() != reflect.Struct || ownCodec(t) {
		return nil
	}
	p := &plan{}
	seen := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("msgpack")
		if tag == "" {
			tag = f.Tag.Get(Tag)
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if f.Name == "_msgpack" || f.Anonymous || !plainTag(name, opts) {
			return nil
		}
		if !f.IsExported() {
			continue
		}
		k, ok := kinds[f.Type.Kind()]
		if f.Type == timeType {
			k, ok = kindTime, true
		} else if !ok || ownCodec(f.Type) {
			return nil
		}
		if name == "" {
			name = f.Name
		}
		if seen[name] {
			return nil
		}
		seen[name] = true
		p.fields = append(p.fields, field{name: name, index: i, off: f.Offset, kind: k})
	}
	if len(p.fields) > 100 { // the probe's values are distinct small numbers
		return nil
	}
	return p
}

// plainTag reports whether a tag's name and options are read by the library as written:
// a name without quotes, colons or spaces, and options that are plain words, none of them
// one the library acts on when decoding a field.
func plainTag(name, opts string) bool {
	if strings.ContainsAny(name, "'\": \t") {
		return false
	}
	if opts == "" {
		return true
	}
	for o := range strings.SplitSeq(opts, ",") {
		if o == "" || o == "intern" || o == "inline" || o == "noinline" || o == "as_array" || o == "asArray" {
			return false
		}
		for _, c := range o {
			if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && c != '_' {
				return false
			}
		}
	}
	return true
}

// agrees checks the plan against the library: a probe value, every field set to a value of
// its own, is encoded by the library, which must write exactly the plan's names in the
// plan's order; the flat decoder and the library must both read the probe back.
func (p *plan) agrees(t reflect.Type) bool {
	probe := reflect.New(t).Elem()
	for i, f := range p.fields {
		v := probe.Field(f.index)
		switch n := i + 1; v.Kind() {
		case reflect.Bool:
			v.SetBool(true) // not false: an omitempty field would not be written
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			v.SetInt(int64(n))
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			v.SetUint(uint64(n))
		case reflect.Float32, reflect.Float64:
			v.SetFloat(float64(n) + 0.5)
		case reflect.String:
			v.SetString("probe-" + strconv.Itoa(n))
		case reflect.Struct: // a time.Time
			v.Set(reflect.ValueOf(time.Unix(1_700_000_000+int64(n), int64(n))))
		}
	}
	data, err := Marshal(probe.Addr().Interface())
	if err != nil {
		return false
	}
	strict := &plan{fields: p.fields, strict: true}
	flat, lib := reflect.New(t), reflect.New(t)
	if !strict.decode(data, flat.UnsafePointer()) || libraryUnmarshal(data, lib.Interface()) != nil {
		return false
	}
	return reflect.DeepEqual(flat.Elem().Interface(), probe.Interface()) &&
		reflect.DeepEqual(lib.Elem().Interface(), probe.Interface())
}
