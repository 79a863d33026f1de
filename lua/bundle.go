// Package lua is EchoCache's script bundle: one .lua file per atomic transition, embedded in
// the binary and run through valkey-go's EVALSHA-with-EVAL-fallback.
//
// The bundle is the protocol. Each file opens with a header that lists every KEYS[i] in
// grammar form, every ARGV[i], the keys it derives from a declared key, the reply and the
// error replies, so a client in another language that loads the same file and follows its
// header behaves identically. manifest.sha1 pins every script's SHA1 (it is sha1sum's
// format: `sha1sum -c manifest.sha1` checks it), so a protocol change is a deliberate diff.
package lua

//go:generate go run ../internal/protocolgen -o ../PROTOCOL.md

import (
	"context"
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/keys"
)

//go:embed *.lua manifest.sha1
var files embed.FS

// Param is one entry of a header: a KEYS, ARGV, DERIVES, FORMAT or ERROR line.
type Param struct {
	// Name is the grammar form for keys (emq:{<q>}:pending), a short name for args (lease_ms;
	// id* for a starred, repeating arg), the format's name, or the error code (EMQSTALE).
	Name string
	// Rule is set for args only: the rule every value must meet, one of [Rules] (uint[1,86400000],
	// jobid, token, ...). A rule with a trailing "?" also admits the empty string.
	Rule string
	Doc  string
}

// Header is a script's declared interface.
type Header struct {
	Summary string
	Keys    []Param // KEYS[1..n], in order
	Args    []Param // ARGV[1..n], in order; a starred name repeats (see [ParseHeader])
	Derives []Param // keys built inside the script from a declared key of the same hash tag
	// Formats names each encoding the script's arguments, reply or messages carry, and each
	// shared rule it follows (fencing, lease). Each is defined in exactly one script of the
	// bundle; the others say "see <script>.lua".
	Formats []Param
	Reply   string
	Errors  []Param // one per error code the script may answer: Name is the code
}

// Script is one file of the bundle.
type Script struct {
	Name   string // the file name without .lua
	Source string
	SHA1   string // hex SHA1 of Source: what EVALSHA names
	Header Header
	lua    *valkey.Lua
	bit    int // 1 + its index in the bundle, for [Loaded]; 0 for a Script made elsewhere
}

// Exec runs the script by EVALSHA, loading it with EVAL on NOSCRIPT. It is not retried by the
// client: a write that may have landed is never sent twice behind the caller's back. A write
// followed by a wait goes through [Loaded.Pipeline] instead, so that the wait follows a script
// that ran.
func (s *Script) Exec(ctx context.Context, c valkey.Client, keys, args []string) valkey.ValkeyResult {
	return s.lua.Exec(ctx, c, keys, args)
}

var bundle = mustLoad()

// Get returns the named script. The bundle is compiled in, so an unknown name is a bug in the
// caller and panics.
func Get(name string) *Script {
	s, ok := bundle[name]
	if !ok {
		panic(fmt.Sprintf("lua: no script %q in the bundle", name))
	}
	return s
}

// All returns every script of the bundle, sorted by name.
func All() []*Script {
	out := make([]*Script, 0, len(bundle))
	for _, s := range bundle {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Manifest is the committed manifest.sha1: each line "<sha1>  <name>.lua".
func Manifest() string {
	b, err := files.ReadFile("manifest.sha1")
	if err != nil {
		panic(err) // embedded at build time
	}
	return string(b)
}

// ManifestOf renders the manifest of the scripts as they are.
func ManifestOf(scripts []*Script) string {
	var b strings.Builder
	for _, s := range scripts {
		fmt.Fprintf(&b, "%s  %s.lua\n", s.SHA1, s.Name)
	}
	return b.String()
}

func mustLoad() map[string]*Script {
	out := map[string]*Script{}
	names, err := fs.Glob(files, "*.lua")
	if err != nil {
		panic(err)
	}
	for n, file := range names {
		src, err := files.ReadFile(file)
		if err != nil {
			panic(err)
		}
		name := strings.TrimSuffix(file, ".lua")
		h, err := ParseHeader(string(src))
		if err != nil {
			panic(fmt.Sprintf("lua: %s: %v", file, err))
		}
		sum := sha1.Sum(src)
		out[name] = &Script{
			Name:   name,
			Source: string(src),
			SHA1:   hex.EncodeToString(sum[:]),
			Header: h,
			lua:    valkey.NewLuaScript(string(src)),
			bit:    n + 1,
		}
	}
	return out
}

// ParseHeader reads the comment block that opens a script. Lines before the first tag are the
// summary. Tagged lines are
//
//	-- KEYS[i]  <grammar form>  <doc>
//	-- ARGV[i]  <name>  <rule>  <doc>
//	-- DERIVES  <grammar form>  <doc>
//	-- FORMAT   <name>  <definition, or "see <script>.lua">
//	-- REPLY    <text>
//	-- ERROR    <CODE>  <when it is answered>
//
// and a comment line indented past the tag column continues the entry above it. KEYS and
// ARGV are numbered 1..n in order; an ARGV name ending in "*" repeats (the starred args form
// one item, given once per item after the plain args). Every ARGV names a rule of [Rules];
// REPLY and at least one ERROR are required; an error code is EMQ or ECC and upper-case
// letters, and no name appears twice in one list.
func ParseHeader(src string) (Header, error) {
	var h Header
	var last *string // where a continuation line goes
	var summary []string
	for _, line := range strings.Split(src, "\n") {
		if !strings.HasPrefix(line, "--") {
			break
		}
		body := strings.TrimPrefix(line, "--")
		text := strings.TrimSpace(body)
		tag, rest, _ := strings.Cut(text, " ")
		rest = strings.TrimSpace(rest)
		switch {
		case strings.HasPrefix(tag, "KEYS[") || strings.HasPrefix(tag, "ARGV["):
			list := &h.Keys
			if tag[0] == 'A' {
				list = &h.Args
			}
			if want := fmt.Sprintf("%s[%d]", tag[:4], len(*list)+1); tag != want {
				return h, fmt.Errorf("header: %s out of order, expected %s", tag, want)
			}
			p := param(rest)
			if tag[0] == 'A' {
				rule, doc, _ := strings.Cut(p.Doc, " ")
				if err := CheckRule(rule); err != nil {
					return h, fmt.Errorf("header: %s %s: %w", tag, p.Name, err)
				}
				p.Rule, p.Doc = rule, strings.TrimSpace(doc)
			}
			*list = append(*list, p)
			last = &(*list)[len(*list)-1].Doc
		case tag == "DERIVES":
			h.Derives = append(h.Derives, param(rest))
			last = &h.Derives[len(h.Derives)-1].Doc
		case tag == "FORMAT":
			p := param(rest)
			if !formatName.MatchString(p.Name) {
				return h, fmt.Errorf("header: FORMAT %q: a format's name is lower-case letters", p.Name)
			}
			h.Formats = append(h.Formats, p)
			last = &h.Formats[len(h.Formats)-1].Doc
		case tag == "REPLY":
			h.Reply, last = rest, &h.Reply
		case tag == "ERROR":
			p := param(rest)
			if !errorCode.MatchString(p.Name) {
				return h, fmt.Errorf("header: ERROR %q: an error code is EMQ or ECC and upper-case letters", p.Name)
			}
			h.Errors = append(h.Errors, p)
			last = &h.Errors[len(h.Errors)-1].Doc
		case tag == "ERRORS":
			return h, fmt.Errorf("header: ERRORS is gone: write one ERROR <CODE> <doc> line per code")
		case text == "":
			last = nil
		case last != nil && strings.HasPrefix(body, "          "):
			*last += " " + text
		case last == nil && h.Keys == nil && h.Args == nil:
			summary = append(summary, text)
		default:
			return h, fmt.Errorf("header: line %q is neither a tag nor a continuation", line)
		}
	}
	h.Summary = strings.Join(summary, " ")
	if h.Reply == "" || len(h.Errors) == 0 {
		return h, fmt.Errorf("header: REPLY and at least one ERROR are required")
	}
	for what, list := range map[string][]Param{"KEYS": h.Keys, "ARGV": h.Args, "FORMAT": h.Formats, "ERROR": h.Errors} {
		seen := map[string]bool{}
		for _, p := range list {
			if seen[p.Name] {
				return h, fmt.Errorf("header: %s %s appears twice", what, p.Name)
			}
			seen[p.Name] = true
		}
	}
	return h, nil
}

var (
	formatName = regexp.MustCompile(`^[a-z]+$`)
	errorCode  = regexp.MustCompile(`^(EMQ|ECC)[A-Z]+$`)
	uintRule   = regexp.MustCompile(`^uint\[(0|[1-9][0-9]{0,14}),(0|[1-9][0-9]{0,14})\]$`)
	bytesRule  = regexp.MustCompile(`^bytes\[(0|[1-9][0-9]{0,8}),(0|[1-9][0-9]{0,8})\]$`)
)

func param(s string) Param {
	name, doc, _ := strings.Cut(s, " ")
	return Param{Name: name, Doc: strings.TrimSpace(doc)}
}

// MaxUint is the largest integer an argument may carry: 15 decimal digits, which Lua's
// numbers (doubles) hold exactly.
const MaxUint = 999_999_999_999_999

// rules are the rules an ARGV may name. Every script checks each of its arguments against its
// rule before it reads or writes a key, and answers its role's argument error (EMQARGS,
// ECCARG) otherwise.
var rules = []Param{
	{Name: "uint[lo,hi]", Doc: "a decimal integer: ^[0-9]+$ (no sign, exponent, point, space or hex), at most 15 digits, lo <= n <= hi"},
	{Name: "jobid", Doc: "a JOB id: ^JOB_[0-7][0-9A-HJKMNP-TV-Z]{25}$, 30 bytes (FORMAT jobid)"},
	{Name: "fence", Doc: "a fencing token (FORMAT fencing): a decimal integer without leading zeros, ^[1-9][0-9]*$, at most 15 digits"},
	{Name: "token", Doc: "a token: exactly 16 bytes of [0-9A-Za-z]"},
	{Name: "id", Doc: "an id: " + keys.IDRule},
	{Name: "name", Doc: "a name (of a lane, like a queue's): " + keys.NameRule},
	{Name: "sha1", Doc: "a SHA1 in hex: exactly 40 bytes of [0-9a-f]"},
	{Name: "cursor", Doc: "a SCAN cursor: ^[0-9]+$, at most 18446744073709551615"},
	{Name: "row", Doc: "a cache row of kind value or not found (FORMAT row): a value row is \\xEC\\x01V, a version of 16 bytes of [0-9A-Za-z] and 12 bytes or more (31 bytes at least), or \\xEC\\x01W, a version of 16 bytes of [0-9A-Za-z] and 20 bytes or more (39 bytes at least); a not-found row is \\xEC\\x01N and 4 bytes (7 bytes exactly)"},
	{Name: "valuerow", Doc: "a cache row of kind value (FORMAT row): \\xEC\\x01V, a version of 16 bytes of [0-9A-Za-z] and 12 bytes or more (31 bytes at least), or \\xEC\\x01W, a version of 16 bytes of [0-9A-Za-z] and 20 bytes or more (39 bytes at least)"},
	{Name: "bytes", Doc: "any bytes"},
	{Name: "bytes[lo,hi]", Doc: "any bytes, lo <= length <= hi (in bytes)"},
}

// Rules lists the rules an ARGV may name, each with its definition. A rule followed by "?"
// also admits the empty string (id?: "" or an id).
func Rules() []Param { return append([]Param(nil), rules...) }

// CheckRule reports whether rule is a rule of [Rules], optionally followed by "?", with
// uint bounds lo <= hi <= [MaxUint].
func CheckRule(rule string) error {
	r := strings.TrimSuffix(rule, "?")
	if lo, hi, ok := UintBounds(r); ok {
		if lo > hi {
			return fmt.Errorf("rule %s: lo > hi", rule)
		}
		return nil
	}
	if lo, hi, ok := LengthBounds(r); ok {
		if lo > hi {
			return fmt.Errorf("rule %s: lo > hi", rule)
		}
		return nil
	}
	for _, p := range rules {
		if p.Name == r && !strings.Contains(r, "[") {
			return nil
		}
	}
	return fmt.Errorf("rule %q is none of uint[lo,hi], jobid, fence, token, id, name, sha1, cursor, row, valuerow, bytes, bytes[lo,hi]", rule)
}

// LengthBounds reads the bounds of a bytes[lo,hi] rule: the shortest and longest value, in
// bytes (at most 9 digits each).
func LengthBounds(rule string) (lo, hi int, ok bool) {
	m := bytesRule.FindStringSubmatch(rule)
	if m == nil {
		return 0, 0, false
	}
	lo, _ = strconv.Atoi(m[1])
	hi, _ = strconv.Atoi(m[2])
	return lo, hi, true
}

// UintBounds reads the bounds of a uint[lo,hi] rule.
func UintBounds(rule string) (lo, hi int64, ok bool) {
	m := uintRule.FindStringSubmatch(rule)
	if m == nil {
		return 0, 0, false
	}
	lo, _ = strconv.ParseInt(m[1], 10, 64)
	hi, _ = strconv.ParseInt(m[2], 10, 64)
	return lo, hi, true
}
