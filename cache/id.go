package cache

import (
	"fmt"
	"reflect"
	"strconv"
	"unsafe"

	"github.com/dgraph-io/ristretto/v2/z"
)

// ID is the set of id types a [Table] accepts: strings and integers, including named types
// over them (type UserID int64). String ids are row ids as they are (1 to 512 bytes, no
// control bytes); integer ids are written in decimal.
type ID interface {
	~string | ~int | ~int32 | ~int64 | ~uint | ~uint32 | ~uint64
}

// idOps are the per-kind operations on an ID type, chosen once per table by reflection so
// the hot path is a plain function call with no interface boxing.
type idOps[K ID] struct {
	// hash is L1's key hash (ristretto's KeyToHash): the id itself for integers, which is
	// collision-free; memhash plus xxhash for strings, as ristretto does for string keys.
	hash func(K) (uint64, uint64)
	// format is the id as it appears in the row key.
	format func(K) string
	// parse reads an id back from its row-key form (invalidation messages carry that form).
	parse func(string) (K, error)
	// append appends the id's row-key form to b (format without its allocation).
	append func(b []byte, k K) []byte
}

func opsFor[K ID]() idOps[K] {
	var zero K
	switch kind := reflect.TypeOf(zero).Kind(); kind {
	case reflect.String:
		return idOps[K]{
			hash: func(k K) (uint64, uint64) {
				return z.KeyToHash(*(*string)(unsafe.Pointer(&k)))
			},
			format: func(k K) string { return *(*string)(unsafe.Pointer(&k)) },
			append: func(b []byte, k K) []byte { return append(b, *(*string)(unsafe.Pointer(&k))...) },
			parse: func(s string) (K, error) {
				var k K
				*(*string)(unsafe.Pointer(&k)) = s
				return k, nil
			},
		}
	case reflect.Int, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint32, reflect.Uint64:
		signed := kind == reflect.Int || kind == reflect.Int32 || kind == reflect.Int64
		ops := idOps[K]{}
		// toInt widens the id to 64 bits, sign-extending signed kinds, so that an id's hash,
		// row key and parse agree whatever the kind's size (int is 32 bits on some targets).
		var toInt func(K) uint64
		var fromInt func(uint64) K
		var bits int
		switch unsafe.Sizeof(zero) {
		case 8:
			bits = 64
			toInt = func(k K) uint64 { return *(*uint64)(unsafe.Pointer(&k)) }
			fromInt = func(u uint64) K { var k K; *(*uint64)(unsafe.Pointer(&k)) = u; return k }
			// The hot path: the id itself is its hash; no second hash is needed because the
			// mapping is one-to-one.
			ops.hash = func(k K) (uint64, uint64) { return *(*uint64)(unsafe.Pointer(&k)), 0 }
		case 4:
			bits = 32
			if signed {
				toInt = func(k K) uint64 { return uint64(int64(*(*int32)(unsafe.Pointer(&k)))) }
			} else {
				toInt = func(k K) uint64 { return uint64(*(*uint32)(unsafe.Pointer(&k))) }
			}
			fromInt = func(u uint64) K { var k K; *(*uint32)(unsafe.Pointer(&k)) = uint32(u); return k }
			ops.hash = func(k K) (uint64, uint64) { return toInt(k), 0 }
		default:
			panic(fmt.Sprintf("cache: id type %T has an unexpected size", zero)) // unreachable
		}
		ops.format = func(k K) string {
			if signed {
				return strconv.FormatInt(int64(toInt(k)), 10)
			}
			return strconv.FormatUint(toInt(k), 10)
		}
		ops.append = func(b []byte, k K) []byte {
			if signed {
				return strconv.AppendInt(b, int64(toInt(k)), 10)
			}
			return strconv.AppendUint(b, toInt(k), 10)
		}
		ops.parse = func(s string) (K, error) {
			if signed {
				n, err := strconv.ParseInt(s, 10, bits)
				if err != nil {
					return zero, fmt.Errorf("cache: id %q: %w", s, err)
				}
				return fromInt(uint64(n)), nil
			}
			n, err := strconv.ParseUint(s, 10, bits)
			if err != nil {
				return zero, fmt.Errorf("cache: id %q: %w", s, err)
			}
			return fromInt(n), nil
		}
		return ops
	}
	panic(fmt.Sprintf("cache: unsupported id type %T", zero)) // unreachable: ID's type set
}
