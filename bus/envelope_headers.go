package bus

import (
	"bytes"
	"fmt"
)

// Envelope headers: an optional block in front of a task envelope that carries metadata a
// handler's middleware reads and the handler never sees, the W3C trace context
// (traceparent, tracestate) first of all. A job row has three fields and the payload is
// opaque to the scripts, so the block rides in the payload:
//
//	NUL ( <name> ":" <value> LF )* LF <kind> NUL <args>
//
// A plain envelope starts with its kind, never with NUL (a kind is 1 to 64 bytes of
// [A-Za-z0-9_.-]), so the block is recognised by its first byte and every payload written
// before it reads exactly as before. A name is 1 to 64 bytes of [a-z0-9-] and appears once;
// a value is 0 to 1024 bytes of printable ASCII (0x20 to 0x7E); a block holds at most
// [MaxHeaders] headers and [MaxHeaderBlock] bytes. Readers ignore names they do not know.
// A worker that predates the block reads such a payload as no envelope and sends the job to
// dead: upgrade workers before producers add headers.

// Bounds of an envelope's header block.
const (
	// MaxHeaders is how many headers one block holds at most.
	MaxHeaders = 32
	// MaxHeaderBlock bounds the block's bytes, from its NUL to its closing LF.
	MaxHeaderBlock = 8192
	// MaxHeaderValue bounds one value's bytes.
	MaxHeaderValue = 1024
)

// Header is one header of an envelope's header block.
type Header struct {
	Name, Value string
}

// WithHeaders returns the task envelope with a header block of headers in front (replacing
// a block it had); no headers returns the plain envelope. It refuses a payload that is not
// an envelope ([ErrNoEnvelope]) and headers that break the block's rules ([ErrInvalid]).
func WithHeaders(envelope []byte, headers ...Header) ([]byte, error) {
	start, n := envelopeKind(envelope)
	if n == 0 {
		return nil, ErrNoEnvelope
	}
	plain := envelope[start:]
	if len(headers) == 0 {
		return append([]byte(nil), plain...), nil
	}
	if len(headers) > MaxHeaders {
		return nil, fmt.Errorf("%w: envelope headers: %d headers, at most %d", ErrInvalid, len(headers), MaxHeaders)
	}
	size := 2 // the NUL and the closing LF
	for i, h := range headers {
		if !validHeaderName(h.Name) {
			return nil, fmt.Errorf("%w: envelope header %d: name %q is not 1 to 64 bytes of [a-z0-9-]", ErrInvalid, i, h.Name)
		}
		if !validHeaderValue(h.Value) {
			return nil, fmt.Errorf("%w: envelope header %s: the value is not 0 to %d bytes of printable ASCII", ErrInvalid, h.Name, MaxHeaderValue)
		}
		for _, o := range headers[:i] {
			if o.Name == h.Name {
				return nil, fmt.Errorf("%w: envelope header %s: named twice", ErrInvalid, h.Name)
			}
		}
		size += len(h.Name) + len(h.Value) + 2
	}
	if size > MaxHeaderBlock {
		return nil, fmt.Errorf("%w: envelope headers: the block is %d bytes, at most %d", ErrInvalid, size, MaxHeaderBlock)
	}
	out := make([]byte, 0, size+len(plain))
	out = append(out, 0)
	for _, h := range headers {
		out = append(append(append(append(out, h.Name...), ':'), h.Value...), '\n')
	}
	out = append(out, '\n')
	return append(out, plain...), nil
}

// EnvelopeHeaders returns the headers of a payload's header block, in order: nil when it has no
// block, empty when its block is (NUL LF). It answers [ErrNoEnvelope] when the payload is not
// an envelope, with or without a block (a malformed block included).
func EnvelopeHeaders(payload []byte) ([]Header, error) {
	start, n := envelopeKind(payload)
	if n == 0 {
		return nil, ErrNoEnvelope
	}
	if start == 0 {
		return nil, nil
	}
	out := []Header{}
	block := payload[1 : start-1] // between the NUL and the closing LF
	for len(block) > 0 {
		line, rest, _ := bytes.Cut(block, []byte{'\n'})
		name, value, _ := bytes.Cut(line, []byte{':'})
		out = append(out, Header{Name: string(name), Value: string(value)})
		block = rest
	}
	return out, nil
}

// HeaderValue is the value of the header name in a payload's header block, and whether it
// has one.
func HeaderValue(payload []byte, name string) (string, bool) {
	hs, _ := EnvelopeHeaders(payload)
	for _, h := range hs {
		if h.Name == name {
			return h.Value, true
		}
	}
	return "", false
}

// envelopeKind finds the kind of an envelope with or without a header block: it starts at
// start and is n bytes long; n is 0 when the payload is not an envelope (a malformed block
// included). It allocates nothing.
func envelopeKind(payload []byte) (start, n int) {
	if len(payload) > 0 && payload[0] == 0 {
		start = headerBlockLen(payload)
		if start == 0 {
			return 0, 0
		}
	}
	return start, envelopeKindLen(payload[start:])
}

// headerBlockLen is the length of the header block at the head of payload (which starts
// with NUL), its closing LF included; 0 when the block breaks a rule.
func headerBlockLen(payload []byte) int {
	i, headers := 1, 0
	var names [MaxHeaders][2]int // each header's name, as offsets: a name appears once
	for {
		if i >= len(payload) || i >= MaxHeaderBlock {
			return 0
		}
		if payload[i] == '\n' {
			return i + 1
		}
		headers++
		if headers > MaxHeaders {
			return 0
		}
		// A name, a colon, a value, a LF.
		j := i
		for j < len(payload) && j-i <= 64 && isHeaderNameByte(payload[j]) {
			j++
		}
		if j == i || j-i > 64 || j >= len(payload) || payload[j] != ':' {
			return 0
		}
		for _, n := range names[:headers-1] {
			if bytes.Equal(payload[n[0]:n[1]], payload[i:j]) {
				return 0
			}
		}
		names[headers-1] = [2]int{i, j}
		k := j + 1
		for k < len(payload) && k-j-1 <= MaxHeaderValue && payload[k] >= 0x20 && payload[k] <= 0x7e {
			k++
		}
		if k-j-1 > MaxHeaderValue || k >= len(payload) || payload[k] != '\n' {
			return 0
		}
		i = k + 1
	}
}

func isHeaderNameByte(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' }

func validHeaderName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isHeaderNameByte(s[i]) {
			return false
		}
	}
	return true
}

func validHeaderValue(s string) bool {
	if len(s) > MaxHeaderValue {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
