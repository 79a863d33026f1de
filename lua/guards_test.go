package lua_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
)

// writeCommands are the commands of keyArgs that change the keyspace or publish.
var writeCommands = map[string]bool{}

func init() {
	for _, c := range strings.Fields(`SET SETNX GETDEL INCR INCRBY PEXPIRE PEXPIREAT HSET HSETNX
		HINCRBY HDEL ZADD ZREM ZPOPMIN ZREMRANGEBYSCORE ZREMRANGEBYLEX LPUSH RPUSH LPOP RPOP LTRIM
		DEL UNLINK SPUBLISH`) {
		writeCommands[c] = true
	}
}

var (
	keysMatchRe = regexp.MustCompile(`local\s+([A-Za-z_]\w*)(?:\s*,\s*([A-Za-z_]\w*))?\s*=\s*string\.match\(KEYS\[1\] or '',\s*'([^']*)'\)`)
	errReplyRe  = regexp.MustCompile(`redis\.error_reply\('([A-Z]+)`)
	callNameRe  = regexp.MustCompile(`redis\.p?call\('([A-Za-z]+)'`)
)

// A name in a hash tag, as every script matches it: the grammar's name bytes, as a Lua set.
const luaName = `[0-9A-Za-z_.%-]+`

// guard is what a script must check of its KEYS before its first redis.call, derived from
// the grammar form of its KEYS[1].
type guard struct {
	pattern string                      // the Lua pattern KEYS[1] must be matched with
	bounds  func(v, id string) []string // the length and byte checks on the captures
	other   func(v, form string) (string, bool)
}

// guardFor derives the guard of a KEYS[1] form. The forms the bundle uses are a queue key
// (emq:{<q>}:<type>), a schedule row (emq:{<q>}:periodic:<name>), a table's record
// (ecc:{<table>}), its stats hash (ecc:{<table>}#stats) and a row (ecc:{<table>}:<id>).
func guardFor(form string) (guard, error) {
	switch {
	case form == keys.Record.Form():
		return guard{
			pattern: `^ecc:{(` + luaName + `#?%d*)}$`,
			bounds:  func(v, _ string) []string { return tagBounds(v) },
			other:   tableOther,
		}, nil
	case form == keys.TableStats.Form():
		return guard{
			pattern: `^ecc:{(` + luaName + `)}#stats$`,
			bounds:  func(v, _ string) []string { return []string{"#" + v + " > 64"} },
			other:   tableOther,
		}, nil
	case form == keys.Row.Form():
		return guard{
			pattern: `^ecc:{(` + luaName + `#?%d*)}:(.+)$`,
			bounds: func(v, id string) []string {
				return append(tagBounds(v), "#"+id+" > 512", "string.find("+id+`, '[%z\1-\31\127]')`)
			},
			other: tableOther,
		}, nil
	case strings.HasPrefix(form, "emq:{<q>}:") && !strings.Contains(form[len("emq:{<q>}:"):], "<"):
		return guard{
			pattern: `^(emq:{` + luaName + `}:)` + form[len("emq:{<q>}:"):] + `$`,
			bounds:  func(v, _ string) []string { return []string{"#" + v + " > 71"} },
			other:   queueOther,
		}, nil
	case form == keys.Periodic.Form():
		// A schedule is named like a queue: the name after the type is matched and bounded too.
		return guard{
			pattern: `^(emq:{` + luaName + `}:)periodic:(` + luaName + `)$`,
			bounds:  func(v, name string) []string { return []string{"#" + v + " > 71", "#" + name + " > 64"} },
			other:   queueOther,
		}, nil
	}
	return guard{}, fmt.Errorf("no guard is known for KEYS[1] %s: teach guardFor its Lua pattern", form)
}

// tagBounds are the checks of a cache script's hash tag v, which is a table's name or a
// shard's "<table>#<shard>" (FORMAT shards): the name split off and bounded, the shard a
// decimal in [0, 255] without leading zeros.
func tagBounds(v string) []string {
	return []string{
		"local name, shard = string.match(" + v + " or '', '^([^#]*)(.*)$')",
		"#name > 64",
		"shard ~= '' and not (shard == '#0' or string.match(shard, '^#[1-9]%d?%d?$') and tonumber(string.sub(shard, 2)) < 256)",
	}
}

// queueOther is the expression a queue script compares another key of its queue with.
func queueOther(v, f string) (string, bool) {
	rest, ok := strings.CutPrefix(f, "emq:{<q>}:")
	if !ok || strings.Contains(rest, "<") {
		return "", false
	}
	return v + " .. '" + rest + "'", true
}

// tableOther is the expression a table script compares a bus key of the same name with.
func tableOther(v, f string) (string, bool) {
	rest, ok := strings.CutPrefix(f, "emq:{<table>}:")
	if !ok || strings.Contains(rest, "<") {
		return "", false
	}
	return "'emq:{' .. " + v + " .. '}:" + rest + "'", true
}

// checkGuards reads a script and fails it unless, before its first redis.call, it checks the
// count of its KEYS, matches KEYS[1] with the grammar's pattern for its declared form, bounds
// the captured name (and id), compares every other KEYS[i] with the key the grammar derives
// from KEYS[1] (or matches it, for a form with an id), answers its role's KEYS error, and
// checks the count of its ARGV. After its first write it must answer no error reply (Valkey has
// no rollback), and it answers exactly the error codes its header declares.
func checkGuards(s *lua.Script) []string {
	var problems []string
	bad := func(format string, args ...any) {
		problems = append(problems, s.Name+".lua: "+fmt.Sprintf(format, args...))
	}
	var code []string
	for _, line := range strings.Split(s.Source, "\n") {
		code = append(code, luaComment.ReplaceAllString(line, ""))
	}
	src := strings.Join(code, "\n")
	first := callRe.FindStringIndex(src)
	if first == nil {
		bad("calls no command")
		return problems
	}
	pre := src[:first[0]]

	role := "EMQ"
	if strings.HasPrefix(s.Header.Keys[0].Name, "ecc:") {
		role = "ECC"
	}
	g, err := guardFor(s.Header.Keys[0].Name)
	if err != nil {
		bad("%v", err)
		return problems
	}
	m := keysMatchRe.FindStringSubmatch(pre)
	switch {
	case m == nil:
		bad("KEYS[1] is not matched with string.match(KEYS[1] or '', <pattern>) before the first redis.call")
	case m[3] != g.pattern:
		bad("KEYS[1] (%s) is matched with %q; the grammar's pattern is %q", s.Header.Keys[0].Name, m[3], g.pattern)
	default:
		for _, b := range g.bounds(m[1], m[2]) {
			if !strings.Contains(pre, b) {
				bad("the name or id matched from KEYS[1] is not bounded: %q is missing before the first redis.call", b)
			}
		}
		for i, p := range s.Header.Keys[1:] {
			k := fmt.Sprintf("KEYS[%d]", i+2)
			if want, ok := g.other(m[1], p.Name); ok {
				if !strings.Contains(pre, k+" ~= "+want) {
					bad("%s (%s) is not compared with %s before the first redis.call", k, p.Name, want)
				}
			} else if !strings.Contains(pre, "string.match("+k+",") && !strings.Contains(pre, k+" ~= ") {
				bad("%s (%s) is neither compared nor matched before the first redis.call", k, p.Name)
			}
		}
	}
	if want := fmt.Sprintf("#KEYS ~= %d", len(s.Header.Keys)); !strings.Contains(pre, want) {
		bad("the count of KEYS is not checked (%q) before the first redis.call", want)
	}
	if !strings.Contains(pre, "redis.error_reply('"+role+"KEYS") {
		bad("no %sKEYS reply before the first redis.call", role)
	}
	if !strings.Contains(pre, "#ARGV") {
		bad("the count of ARGV is not checked before the first redis.call")
	}

	// No error reply after the first write: a refused call must have written nothing.
	wrote := false
	for i, line := range code {
		for _, c := range callNameRe.FindAllStringSubmatch(line, -1) {
			if writeCommands[strings.ToUpper(c[1])] {
				wrote = true
			}
		}
		if wrote && strings.Contains(line, "redis.error_reply(") {
			bad("line %d answers an error after a write", i+1)
		}
	}

	// The codes answered are the codes declared.
	declared := map[string]bool{}
	for _, e := range s.Header.Errors {
		declared[e.Name] = true
	}
	used := map[string]bool{}
	for _, c := range errReplyRe.FindAllStringSubmatch(src, -1) {
		used[c[1]] = true
		if !declared[c[1]] {
			bad("answers %s, which its header does not declare", c[1])
		}
	}
	// Codes built at run time ('EMQTYPE ' .. key) are found by their literal prefix.
	for _, c := range regexp.MustCompile(`'((?:EMQ|ECC)[A-Z]+) `).FindAllStringSubmatch(src, -1) {
		used[c[1]] = true
	}
	for code := range declared {
		if !used[code] {
			bad("declares %s but never answers it", code)
		}
	}
	for _, want := range []string{role + "KEYS", argsCode(role)} {
		if !declared[want] {
			bad("declares no %s", want)
		}
	}
	return problems
}

func argsCode(role string) string {
	if role == "ECC" {
		return "ECCARG"
	}
	return "EMQARGS"
}

// TestGuardsCatchMutations proves the guard check fails a script that skips a key check:
// each mutation removes or weakens one check of a real script of the bundle.
func TestGuardsCatchMutations(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, script, old, new string
	}{
		{"another KEYS not compared", "claim", " or KEYS[3] ~= base .. 'schedule'", ""},
		{"KEYS[1] matched loosely", "cache_fill", `'^ecc:{([0-9A-Za-z_.%-]+#?%d*)}:(.+)$'`, `'^(.-):(.+)$'`},
		{"KEYS[1] not matched", "cache_reclaim", `string.match(KEYS[1] or '', '^ecc:{([0-9A-Za-z_.%-]+#?%d*)}:(.+)$')`, `'t', KEYS[1]`},
		{"shard not bounded", "cache_flush", " < 256", " < 1000"},
		{"shard with leading zeros", "cache_refresh", "shard == '#0' or ", "string.match(shard, '^#%d+$') or "},
		{"name not bounded", "complete", " or #base > 71", ""},
		{"id not bounded", "cache_refresh", " or #id > 512", ""},
		{"control bytes in the id", "cache_fill", ` or string.find(id, '[%z\1-\31\127]')`, ""},
		{"count of KEYS unchecked", "enqueue", "#KEYS ~= 4 or ", ""},
		{"channel not compared", "cache_set", " or KEYS[2] ~= 'emq:{' .. tag .. '}:inval'", ""},
		{"channel of the table, not the shard", "cache_invalidate", "KEYS[2] ~= 'emq:{' .. tag .. '}:inval'", "KEYS[2] ~= 'emq:{' .. name .. '}:inval'"},
		{"check after a read", "cache_invalidate", "local tag = string.match", "redis.call('TYPE', KEYS[1])\nlocal tag = string.match"},
		{"error after a write", "cache_set", "local seq = redis.call('HINCRBY'", "if px == '1' then return redis.error_reply('ECCARG late') end\nlocal seq = redis.call('HINCRBY'"},
		{"undeclared code", "pause", "return 1\n", "if false then return redis.error_reply('EMQNOPE x') end\nreturn 1\n"},
		{"schedule name not bounded", "periodic_fire", " or #name > 64", ""},
		{"schedule row not tied to the index", "periodic_upsert", " or KEYS[2] ~= base .. 'periodic:' .. name", ""},
		{"count of ARGV unchecked", "due", "if #ARGV ~= 0 then return redis.error_reply('EMQARGS expected no ARGV') end\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := lua.Get(tc.script)
			require.Empty(t, checkGuards(s), "the script as it is passes")
			require.Contains(t, s.Source, tc.old)
			m := *s
			m.Source = strings.Replace(s.Source, tc.old, tc.new, 1)
			require.NotEmpty(t, checkGuards(&m), "the mutated script must fail")
		})
	}
}
