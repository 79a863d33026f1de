package jsonfmt

import (
	stdjson "encoding/json"
	"reflect"
	"sync"
	"time"
	"unsafe"
)

// The one write where the library parts from encoding/json: a time.Time that RFC 3339 cannot
// hold (a year outside 0 to 9999, a zone offset of a whole day or more), which json.Marshal
// refuses, is written by the library as a string that neither decoder reads back. Marshal
// finds such a time before the library writes, and answers json.Marshal's own error.

var (
	timeType      = reflect.TypeFor[time.Time]()
	marshalerType = reflect.TypeFor[stdjson.Marshaler]()
	textType      = reflect.TypeFor[interface{ MarshalText() ([]byte, error) }]()
)

// holdsTime memoizes, per type, whether a value of it may hold a time.Time that Marshal
// writes through its fields, elements or an interface (a type with a marshaler of its own
// other than time.Time writes what it writes, and is not looked into).
var holdsTime sync.Map // reflect.Type -> bool

func mayHoldTime(t reflect.Type) bool {
	if v, ok := holdsTime.Load(t); ok {
		return v.(bool)
	}
	holdsTime.Store(t, false) // a recursive type meets itself as "no" while it is looked at
	v := computeHoldsTime(t)
	holdsTime.Store(t, v)
	return v
}

func computeHoldsTime(t reflect.Type) bool {
	if t == timeType {
		return true
	}
	if t.Kind() != reflect.Pointer && (t.Implements(marshalerType) || t.Implements(textType)) {
		return false
	}
	switch t.Kind() {
	case reflect.Interface:
		return true // whatever it holds at run time
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return mayHoldTime(t.Elem())
	case reflect.Map:
		return mayHoldTime(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if (f.IsExported() || f.Anonymous) && f.Tag.Get("json") != "-" && mayHoldTime(f.Type) {
				return true
			}
		}
	}
	return false
}

// badTime reports whether v holds a time.Time that json.Marshal refuses.
func badTime(v reflect.Value, depth int) bool {
	if !v.IsValid() || depth > 1000 || !mayHoldTime(v.Type()) {
		return false
	}
	if v.Type() == timeType {
		t, ok := timeOf(v)
		if !ok {
			return false
		}
		_, off := t.Zone()
		return t.Year() < 0 || t.Year() > 9999 || off <= -24*3600 || off >= 24*3600
	}
	switch v.Kind() {
	case reflect.Interface, reflect.Pointer:
		return !v.IsNil() && badTime(v.Elem(), depth+1)
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if badTime(v.Index(i), depth+1) {
				return true
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			if badTime(it.Value(), depth+1) {
				return true
			}
		}
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if (f.IsExported() || f.Anonymous) && f.Tag.Get("json") != "-" && badTime(v.Field(i), depth+1) {
				return true
			}
		}
	}
	return false
}

// timeOf reads the time.Time v holds, also through an unexported embedded field (which
// json promotes the fields of); false when it cannot be read.
func timeOf(v reflect.Value) (time.Time, bool) {
	if v.CanInterface() {
		return v.Interface().(time.Time), true
	}
	if v.CanAddr() {
		return *(*time.Time)(unsafe.Pointer(v.UnsafeAddr())), true
	}
	return time.Time{}, false
}

// timeError is json.Marshal's error for v when v holds a time json.Marshal refuses, else nil.
func timeError(v any) (err error) {
	if v == nil || !mayHoldTime(reflect.TypeOf(v)) {
		return nil // the common case: one lookup
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer { // an addressable copy: its fields can be read through pointers
		cp := reflect.New(rv.Type()).Elem()
		cp.Set(rv)
		rv = cp
	}
	if !badTime(rv, 0) {
		return nil
	}
	_, err = stdjson.Marshal(v)
	return err
}
