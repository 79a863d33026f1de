package keys

import (
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sync"
	"time"
)

// JobID is a branded job id: "JOB_" followed by 26 Crockford base32 characters in ULID
// layout (48-bit Unix milliseconds, then 80 bits of randomness). Lex order is mint order and
// the id carries its mint time, so a queue needs no second index for either.
//
// A JobID can only come from [NewJobID], [JobIDAt] or [ParseJobID]; the zero JobID is
// unbranded and the job-row builder refuses it.
type JobID struct{ s string }

// JobIDLen is the length of a JobID's text.
const JobIDLen = len(jobBrand) + 26

const (
	jobBrand  = "JOB_"
	crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
)

// String is the id's text, "" for the zero JobID.
func (id JobID) String() string { return id.s }

// IsZero reports whether id is the zero (unbranded) JobID.
func (id JobID) IsZero() bool { return id.s == "" }

// MarshalText is the id's text, so that a JobID is a JSON string ("" for the zero JobID).
func (id JobID) MarshalText() ([]byte, error) { return []byte(id.s), nil }

// UnmarshalText reads an id as [ParseJobID] does; empty text is the zero JobID.
func (id *JobID) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*id = JobID{}
		return nil
	}
	p, err := ParseJobID(string(b))
	if err != nil {
		return err
	}
	*id = p
	return nil
}

// Time is the id's mint time, to the millisecond.
func (id JobID) Time() time.Time {
	if id.s == "" {
		return time.Time{}
	}
	var ms uint64
	for i := 0; i < 10; i++ { // the first 10 characters hold the 48-bit time (50 bits, top 2 zero)
		ms = ms<<5 | uint64(decodeTab[id.s[len(jobBrand)+i]])
	}
	return time.UnixMilli(int64(ms))
}

// decodeTab maps a canonical Crockford character to its value, and every other byte to 0xFF.
var decodeTab = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xFF
	}
	for i := 0; i < len(crockford); i++ {
		t[crockford[i]] = byte(i)
	}
	return t
}()

// ParseJobID reads a JobID's text. Only the canonical spelling is accepted (upper case, no
// I, L, O or U, first character 0-7), so one job has exactly one key.
func ParseJobID(s string) (JobID, error) {
	if len(s) != JobIDLen || s[:len(jobBrand)] != jobBrand {
		return JobID{}, fmt.Errorf("%w job id %q: a JOB id is %q followed by 26 Crockford base32 characters", ErrInvalid, clip(s), jobBrand)
	}
	body := s[len(jobBrand):]
	if body[0] > '7' {
		return JobID{}, fmt.Errorf("%w job id %q: the first character must be 0-7 (128 bits)", ErrInvalid, s)
	}
	for i := 0; i < len(body); i++ {
		if decodeTab[body[i]] == 0xFF {
			return JobID{}, fmt.Errorf("%w job id %q: %q at %d is not an upper-case Crockford base32 character", ErrInvalid, s, body[i], len(jobBrand)+i)
		}
	}
	return JobID{s: s}, nil
}

// minter keeps ids monotonic inside the process: within one millisecond (or when the clock
// steps back) the 80-bit random part is incremented instead of redrawn.
type mintState struct {
	sync.Mutex
	ms     uint64
	hi     uint16 // top 16 of the 80 random bits
	lo     uint64 // low 64 of the 80 random bits
	buf    [1024]byte
	bufPos int
}

var minter mintState

// NewJobID mints a JobID. Ids minted by one process are strictly increasing, across
// goroutines and within one millisecond.
func NewJobID() JobID {
	now := uint64(time.Now().UnixMilli())
	m := &minter
	m.Lock()
	if now > m.ms {
		m.ms = now
		m.hi, m.lo = m.random()
	} else {
		m.lo++
		if m.lo == 0 {
			m.hi++
			if m.hi == 0 { // 2^80 ids in one millisecond: borrow the next millisecond
				m.ms++
			}
		}
	}
	ms, hi, lo := m.ms, m.hi, m.lo
	m.Unlock()
	return JobID{s: encode(ms, hi, lo)}
}

// random draws 80 bits from a buffered crypto/rand read, refilled 100 draws at a time.
func (m *mintState) random() (uint16, uint64) {
	if m.bufPos == 0 || m.bufPos+10 > len(m.buf) {
		if _, err := crand.Read(m.buf[:]); err != nil {
			panic(fmt.Sprintf("keys: crypto/rand failed: %v", err)) // never returns an error on Linux
		}
		m.bufPos = 0
	}
	b := m.buf[m.bufPos : m.bufPos+10]
	m.bufPos += 10
	// Keep the top bit of the random part clear so an increment cannot overflow in practice.
	return binary.BigEndian.Uint16(b[:2]) & 0x7FFF, binary.BigEndian.Uint64(b[2:])
}

// encode writes 128 bits (ms<<80 | hi<<64 | lo) as JOB_ + 26 base32 characters, 5 bits each
// from the top; the first character carries the top 3 bits.
func encode(ms uint64, hi uint16, lo uint64) string {
	var out [JobIDLen]byte
	copy(out[:], jobBrand)
	// The 128-bit value as two words: top = ms<<16 | hi, bottom = lo.
	top := ms<<16 | uint64(hi)
	for i := 25; i >= 0; i-- {
		out[len(jobBrand)+i] = crockford[lo&31]
		lo = lo>>5 | top<<59
		top >>= 5
	}
	return string(out[:])
}

// JobIDFloor is the least JOB id text minted in t's millisecond: every id minted at or after
// that millisecond sorts at or after it, every id minted before sorts before it. Times before
// the Unix epoch clamp to it, times past the 48-bit range to the last millisecond. It is a
// bound for lex ranges over the score-0 sets, not a JobID: its random part is all zeros.
func JobIDFloor(t time.Time) string {
	// Compared as times first: UnixMilli of a time far past the 48-bit range overflows.
	var ms int64
	switch last := time.UnixMilli(1<<48 - 1); {
	case t.After(last):
		ms = 1<<48 - 1
	case t.Before(time.UnixMilli(0)):
		ms = 0
	default:
		ms = t.UnixMilli()
	}
	return encode(uint64(ms), 0, 0)
}

// JobIDAt is the deterministic JobID of (ms, seed): its time part is ms (clamped to the 48-bit
// range like [JobIDFloor]) and its 80-bit random part is the first 80 bits of SHA-256(seed).
// Every process mints the same id for the same ms and seed, and the id carries ms as its mint
// time. The periodic scheduler mints a tick's job with it, so that two processes firing one
// tick name one job. Ids of distinct seeds collide only as SHA-256 prefixes do; JobIDAt does
// not take part in [NewJobID]'s monotonic sequence.
func JobIDAt(ms int64, seed []byte) JobID {
	ms = min(max(ms, 0), 1<<48-1)
	sum := sha256.Sum256(seed)
	return JobID{s: encode(uint64(ms), binary.BigEndian.Uint16(sum[:2]), binary.BigEndian.Uint64(sum[2:10]))}
}
