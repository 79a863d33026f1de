package cache

import (
	"encoding/binary"
	"math"
	"time"
)

// The L2 row format. Every row EchoCache writes opens with a three-byte header: a magic
// byte, the format version and the kind. What follows depends on the kind:
//
//	value      EC 01 'V' | version (16 bytes) | load time (uint32 BE, microseconds) |
//	           expiry (uint64 BE, unix ms, the writer's clock) | payload
//	versioned  EC 01 'W' | version (16 bytes) | value version (uint64 BE) | load time |
//	           expiry | payload
//	not found  EC 01 'N' | load time
//	fill lease EC 01 'L' | token (16 bytes)
//	refreshing EC 01 'R' | token (16 bytes) | version | load time | expiry | payload
//	           EC 01 'S' | token (16 bytes) | version | value version | load time | expiry | payload
//
// A versioned value row is written by a table with [TableOpts].Version: its value version is
// what that function read from the value, and cache_set refuses a versioned write whose value
// version is lower than the row's (see [Table.Set]); 'S' is its refresh claim. The kinds were
// added without a new format version: a reader that predates them reads W and S rows as
// unreadable, a miss.
//
// A fill lease is the placeholder a filler writes with SET NX PX before it calls the loader;
// its token becomes the version of the value row the filler writes. "Refreshing" is a value row
// claimed by one process for an early refresh (XFetch): readers use its value while the
// claimant loads, and a claim names the version it refreshes, so a process whose copy is of an
// older version cannot refresh a row that was refreshed meanwhile. The load time travels with
// the value so that every process scales its early-refresh probability by it. The expiry, by
// the writer's wall clock, tells a reader that has not asked for the row's PTTL (a table
// without L1) whether the row may be near its end and worth asking; it is never used for a
// deadline, so clock skew between hosts cannot make anything outlive its row. The lua scripts
// cache_fill, cache_refresh and cache_reclaim read and write the same format.
//
// A row that does not parse (another format version, a foreign writer, corrupt bytes) is a
// miss, counted in [Stats].CorruptRows, and is replaced by the next fill.
const (
	rowMagic   = 0xEC
	rowVersion = 0x01
	headerLen  = 3
	tokenLen   = 16
	deltaLen   = 4
	expiryLen  = 8

	vversionLen = 8

	kindValue     = 'V'
	kindVersioned = 'W'
	kindNotFound  = 'N'
	kindLease     = 'L'
	kindRefresh   = 'R'
	kindVRefresh  = 'S'
)

// rowKind is what a read of the row found.
type rowKind uint8

const (
	rowAbsent   rowKind = iota // no row
	rowValue                   // a value (possibly claimed for refresh)
	rowNotFound                // a remembered not-found
	rowLease                   // another filler's lease
	rowCorrupt                 // bytes this version cannot read
)

// row is a parsed L2 row. Its strings alias the bytes read.
type row struct {
	kind      rowKind
	token     string        // lease rows, and value rows claimed for refresh: the claim
	version   string        // value rows: the token of the fill that wrote it
	vversion  uint64        // versioned value rows (W, S): the value's version
	versioned bool          // the row is a versioned value row
	delta     time.Duration // value and not-found rows: how long the load took
	expires   int64         // value rows: unix ms, by the writer's clock
	payload   string        // value rows
}

// parseRow reads a row. It never panics: anything it cannot read is rowCorrupt.
func parseRow(s string) row {
	if len(s) < headerLen || s[0] != rowMagic || s[1] != rowVersion {
		return row{kind: rowCorrupt}
	}
	body := s[headerLen:]
	switch s[2] {
	case kindLease:
		if len(body) != tokenLen {
			return row{kind: rowCorrupt}
		}
		return row{kind: rowLease, token: body}
	case kindValue, kindVersioned, kindNotFound, kindRefresh, kindVRefresh:
		var token, version string
		if s[2] == kindRefresh || s[2] == kindVRefresh {
			if len(body) < tokenLen {
				return row{kind: rowCorrupt}
			}
			token, body = body[:tokenLen], body[tokenLen:]
		}
		if s[2] != kindNotFound {
			if len(body) < tokenLen {
				return row{kind: rowCorrupt}
			}
			version, body = body[:tokenLen], body[tokenLen:]
		}
		versioned := s[2] == kindVersioned || s[2] == kindVRefresh
		var vv uint64
		if versioned {
			if len(body) < vversionLen {
				return row{kind: rowCorrupt}
			}
			for i := range vversionLen {
				vv = vv<<8 | uint64(body[i])
			}
			body = body[vversionLen:]
		}
		if len(body) < deltaLen {
			return row{kind: rowCorrupt}
		}
		us := uint32(body[0])<<24 | uint32(body[1])<<16 | uint32(body[2])<<8 | uint32(body[3])
		delta := time.Duration(us) * time.Microsecond
		if s[2] == kindNotFound {
			if len(body) != deltaLen {
				return row{kind: rowCorrupt}
			}
			return row{kind: rowNotFound, delta: delta}
		}
		body = body[deltaLen:]
		if len(body) < expiryLen {
			return row{kind: rowCorrupt}
		}
		var exp uint64
		for i := range expiryLen {
			exp = exp<<8 | uint64(body[i])
		}
		if exp > math.MaxInt64 {
			return row{kind: rowCorrupt} // no writer sets the top bit: unix ms past year 292,278,994
		}
		return row{kind: rowValue, token: token, version: version, vversion: vv, versioned: versioned,
			delta: delta, expires: int64(exp), payload: body[expiryLen:]}
	}
	return row{kind: rowCorrupt}
}

// micros is a load time as the header stores it, saturating at the field's width.
func micros(d time.Duration) uint32 {
	us := d / time.Microsecond
	switch {
	case us < 0:
		return 0
	case us > math.MaxUint32:
		return math.MaxUint32
	}
	return uint32(us)
}

// valueRow builds a value row of the given version (the writer's token) around payload;
// expires is the row's expiry in unix ms by the writer's clock.
func valueRow(version string, delta time.Duration, expires int64, payload []byte) string {
	b := make([]byte, 0, headerLen+tokenLen+deltaLen+expiryLen+len(payload))
	b = append(b, rowMagic, rowVersion, kindValue)
	b = append(b, version...)
	b = binary.BigEndian.AppendUint32(b, micros(delta))
	b = binary.BigEndian.AppendUint64(b, uint64(max(expires, 0)))
	return string(append(b, payload...))
}

// versionedRow builds a versioned value row: valueRow's fields and the value's version vv,
// which cache_set compares.
func versionedRow(version string, vv uint64, delta time.Duration, expires int64, payload []byte) string {
	b := make([]byte, 0, headerLen+tokenLen+vversionLen+deltaLen+expiryLen+len(payload))
	b = append(b, rowMagic, rowVersion, kindVersioned)
	b = append(b, version...)
	b = binary.BigEndian.AppendUint64(b, vv)
	b = binary.BigEndian.AppendUint32(b, micros(delta))
	b = binary.BigEndian.AppendUint64(b, uint64(max(expires, 0)))
	return string(append(b, payload...))
}

// notFoundRow builds a not-found row.
func notFoundRow(delta time.Duration) string {
	b := make([]byte, 0, headerLen+deltaLen)
	b = append(b, rowMagic, rowVersion, kindNotFound)
	return string(binary.BigEndian.AppendUint32(b, micros(delta)))
}

// leaseRow builds a fill-lease row for token.
func leaseRow(token string) string {
	return string([]byte{rowMagic, rowVersion, kindLease}) + token
}
