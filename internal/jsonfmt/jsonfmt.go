// Package jsonfmt is the JSON of the default codecs of the cache ([cache.JSON]) and the bus
// ([bus.JSONCodec]): the encoding/json format, byte for byte, written and read by
// github.com/segmentio/encoding/json, which decodes three to four times as fast as
// encoding/json with a fraction of its allocations (BenchmarkUnmarshal). A row's or a task's
// payload is the hottest thing a read or a job decodes, and on a read that reaches L2 the
// decode is most of what the client spends between one round trip and the next.
//
// The parity with encoding/json is what this package promises and its tests check:
// [Marshal] writes the bytes json.Marshal writes (FuzzMarshalParity), and fails where it fails
// on a time.Time RFC 3339 cannot hold, which the library alone would write as a string no
// decoder reads back (TestMarshalRefusesTimesAsEncodingJSON); [Unmarshal] accepts
// the inputs json.Unmarshal accepts and yields the same value (FuzzParity, seeded with inputs
// on which other fast decoders part from encoding/json: invalid JSON inside unknown fields,
// invalid UTF-8, exponents in integers), every time json.Marshal writes included
// (FuzzTimeParity). One difference is known, found by FuzzParity and pinned by
// TestTimeLeniency: a time.Time whose date and time are joined by W instead of T
// ("2026-01-02W03:04:05Z") is read as if joined by T, where encoding/json refuses it. Errors
// are reported where encoding/json reports them, in the library's own words, which quote the
// offending input; after an error the value may hold other partial results than
// encoding/json would leave.
//
// [cache.JSON]: https://pkg.go.dev/github.com/echocache/echocache/cache#JSON
// [bus.JSONCodec]: https://pkg.go.dev/github.com/echocache/echocache/bus#JSONCodec
package jsonfmt

import "github.com/segmentio/encoding/json"

// Marshal encodes v as json.Marshal does; a time.Time json.Marshal refuses (see times.go)
// fails with json.Marshal's error.
func Marshal(v any) ([]byte, error) {
	if err := timeError(v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// Unmarshal decodes data into v as json.Unmarshal does. It neither keeps nor changes data
// (strings, numbers and raw messages are copied out of it), so data may alias a string.
func Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }
