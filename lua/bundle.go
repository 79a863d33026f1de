// Package lua is EchoCache's script bundle: one .lua file per atomic transition, embedded in
// the binary and run through valkey-go's EVALSHA-with-EVAL-fallback.
//
// The bundle is the protocol. Each file opens with a header that lists every KEYS[i] in
// grammar form, every ARGV[i], the keys it derives from a declared key, the reply and the
// error replies, so a client in another language that loads the same file and follows its
// header behaves identically. manifest.sha1 pins every script's SHA1 (it is sha1sum's
// format: `sha1sum -c manifest.sha1` checks it), so a protocol change is a deliberate diff.
package lua

import (
	"context"
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/valkey-io/valkey-go"
)

//go:embed *.lua manifest.sha1
var files embed.FS

// Param is one declared KEYS, ARGV or DERIVES entry of a header.
type Param struct {
	Name string // grammar form for keys (emq:{<q>}:pending), a short name for args (lease_ms)
	Doc  string
}

// Header is a script's declared interface.
type Header struct {
	Summary string
	Keys    []Param // KEYS[1..n], in order
	Args    []Param // ARGV[1..n], in order
	Derives []Param // keys built inside the script from a declared key of the same hash tag
	Reply   string
	Errors  string
}

// Script is one file of the bundle.
type Script struct {
	Name   string // the file name without .lua
	Source string
	SHA1   string // hex SHA1 of Source: what EVALSHA names
	Header Header
	lua    *valkey.Lua
}

// Exec runs the script by EVALSHA, loading it with EVAL on NOSCRIPT. It is not retried by the
// client: a write that may have landed is never sent twice behind the caller's back.
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
	for _, file := range names {
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
		}
	}
	return out
}

// ParseHeader reads the comment block that opens a script. Tagged lines are
// "-- KEYS[i] <name> <doc>", "-- ARGV[i] <name> <doc>", "-- DERIVES <name> <doc>",
// "-- REPLY <text>" and "-- ERRORS <text>"; a comment line indented past the tag column
// continues the entry above it. KEYS and ARGV must be numbered 1..n in order, and REPLY and
// ERRORS must be present.
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
			*list = append(*list, p)
			last = &(*list)[len(*list)-1].Doc
		case tag == "DERIVES":
			h.Derives = append(h.Derives, param(rest))
			last = &h.Derives[len(h.Derives)-1].Doc
		case tag == "REPLY":
			h.Reply, last = rest, &h.Reply
		case tag == "ERRORS":
			h.Errors, last = rest, &h.Errors
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
	if h.Reply == "" || h.Errors == "" {
		return h, fmt.Errorf("header: REPLY and ERRORS are required")
	}
	return h, nil
}

func param(s string) Param {
	name, doc, _ := strings.Cut(s, " ")
	return Param{Name: name, Doc: strings.TrimSpace(doc)}
}
