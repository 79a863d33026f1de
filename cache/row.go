package cache

import (
	"encoding/binary"
	"math"
	"time"
)

// The L2 row format. Every row EchoCache writes opens with a three-byte header: a magic
// byte, the format version and the kind. What follows depends on the kind:
//
//	value      EC 01 'V' | version (16 bytes) | load time (uint32 BE, microseconds) | payload
//	not found  EC 01 'N' | load time
//	fill lease EC 01 'L' | token (16 bytes)
//	refreshing EC 01 'R' | token (16 bytes) | version | load time | payload
//
// A fill lease is the placeholder a filler writes with SET NX PX before it calls the loader;
// its token becomes the version of the value row the filler writes. "Refreshing" is a value
// row claimed by one process for an early refresh (XFetch): readers use its value while the
// claimant loads, and a claim names the version it refreshes, so a process whose copy is of
// an older version cannot refresh a row that was refreshed meanwhile. The load time travels
// with the value so that every process scales its early-refresh probability by it. The lua scripts cache_fill,
// cache_refresh and cache_reclaim read and write the same format.
//
// A row that does not parse (another format version, a foreign writer, corrupt bytes) is a
// miss, counted in [Stats].CorruptRows, and is replaced by the next fill.
const (
	rowMagic   = 0xEC
	rowVersion = 0x01
	headerLen  = 3
	tokenLen   = 16
	deltaLen   = 4

	kindValue    = 'V'
	kindNotFound = 'N'
	kindLease    = 'L'
	kindRefresh  = 'R'
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
	kind    rowKind
	token   string        // lease rows, and value rows claimed for refresh: the claim
	version string        // value rows: the token of the fill that wrote it
	delta   time.Duration // value and not-found rows: how long the load took
	payload string        // value rows
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
	case kindValue, kindNotFound, kindRefresh:
		var token, version string
		if s[2] == kindRefresh {
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
		return row{kind: rowValue, token: token, version: version, delta: delta, payload: body[deltaLen:]}
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

// valueRow builds a value row of the given version (the writer's token) around payload.
func valueRow(version string, delta time.Duration, payload []byte) string {
	b := make([]byte, 0, headerLen+tokenLen+deltaLen+len(payload))
	b = append(b, rowMagic, rowVersion, kindValue)
	b = append(b, version...)
	b = binary.BigEndian.AppendUint32(b, micros(delta))
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
