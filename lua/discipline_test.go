package lua_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
)

// keyArgs says, for every command the bundle may call, which arguments (1-based, after the
// command name) are keys or shard channels. The set is closed: a script calling a command
// missing here fails TestKeyDiscipline until the command is added with its key positions.
var keyArgs = map[string]func(nargs int) []int{}

func init() {
	first := func(int) []int { return []int{1} }
	all := func(n int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = i + 1
		}
		return out
	}
	none := func(int) []int { return nil }
	for _, c := range strings.Fields(`GET SET SETNX GETDEL INCR INCRBY PEXPIRE PEXPIREAT PTTL TYPE
		HGET HSET HSETNX HINCRBY HGETALL HDEL HMGET HLEN HEXISTS HKEYS HRANDFIELD
		ZADD ZREM ZPOPMIN ZRANGE ZRANGEBYSCORE ZRANGEBYLEX ZREVRANGEBYLEX ZREVRANGE ZCARD ZSCORE
		ZMSCORE ZCOUNT ZLEXCOUNT ZREMRANGEBYSCORE ZREMRANGEBYLEX ZRANK
		LPUSH RPUSH LPOP RPOP LTRIM LLEN LRANGE LINDEX SPUBLISH`) {
		keyArgs[c] = first
	}
	for _, c := range []string{"DEL", "UNLINK", "EXISTS", "MGET"} {
		keyArgs[c] = all
	}
	keyArgs["TIME"] = none
	keyArgs["SCAN"] = none // no key argument: its MATCH pattern is not a key (cache_flush)
	keyArgs["INFO"] = none // no key argument: its section name (cache_flush reads run_id)
}

var (
	callRe    = regexp.MustCompile(`redis\.p?call\(`)
	keysRefRe = regexp.MustCompile(`^KEYS\[(\d+)\]$`)
	assignRe  = regexp.MustCompile(`^\s*(?:local\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.+)$`)
	forInRe   = regexp.MustCompile(`^\s*for\s+([A-Za-z_][A-Za-z0-9_]*)\s*(?:,\s*([A-Za-z_][A-Za-z0-9_]*))?\s+in\s+`)
	identRe   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	argvRefRe = regexp.MustCompile(`ARGV\[(\d+)\]`)
	strCallRe = regexp.MustCompile(`^string\.[a-z]+\((.*)\)$`)
	// tableSetRe is an assignment to one element of a table: rows[i] = base .. 'job:' .. id.
	tableSetRe = regexp.MustCompile(`^\s*([A-Za-z_][A-Za-z0-9_]*)\[[^\]]*\]\s*=\s*(.+)$`)
	// unpackRe is unpack(rows, ...) in a key position: every element of rows is a key.
	unpackRe   = regexp.MustCompile(`^unpack\(([A-Za-z_][A-Za-z0-9_]*)\s*(?:,.*)?\)$`)
	luaComment = regexp.MustCompile(`--.*$`)
)

// multiAssignRe is an assignment of more than one name: the names, then the expression.
var multiAssignRe = regexp.MustCompile(`^\s*(?:local\s+)?([A-Za-z_][A-Za-z0-9_]*(?:\s*,\s*[A-Za-z_][A-Za-z0-9_]*)+)\s*=\s*(.+)$`)

// TestKeyDiscipline reads every script and fails when a command touches a key that is neither
// declared in KEYS nor derived from a declared key: a derived key is an expression whose head
// (the first operand of a .. chain) is KEYS[i] or a variable so derived, possibly through a
// string.* function applied to one. The grammar then guarantees the same hash tag: a derived
// key is the declared key's prefix with a type and an id after it.
func TestKeyDiscipline(t *testing.T) {
	t.Parallel()
	for _, s := range lua.All() {
		t.Run(s.Name, func(t *testing.T) {
			t.Parallel()
			for _, p := range checkScript(s) {
				t.Error(p)
			}
			for _, p := range checkGuards(s) {
				t.Error(p)
			}
		})
	}
}

func checkScript(s *lua.Script) []string {
	var problems []string
	derived := map[string]bool{}
	nKeys, nArgs := len(s.Header.Keys), len(s.Header.Args)
	isDerived := func(expr string) bool { return derivedExpr(expr, derived, nKeys) }
	for i, raw := range strings.Split(s.Source, "\n") {
		line := luaComment.ReplaceAllString(raw, "")
		where := s.Name + ".lua:" + strconv.Itoa(i+1)
		for _, m := range argvRefRe.FindAllStringSubmatch(line, -1) {
			if n, _ := strconv.Atoi(m[1]); n > nArgs {
				problems = append(problems, where+": ARGV["+m[1]+"] is not declared in the header")
			}
		}
		if m := assignRe.FindStringSubmatch(line); m != nil && !strings.Contains(m[2], "redis.") {
			derived[m[1]] = isDerived(strings.TrimSpace(m[2]))
		}
		if m := tableSetRe.FindStringSubmatch(line); m != nil {
			// A table is a table of keys while every element assigned to it is derived; one
			// element that is not makes it none for good.
			k := "[]" + m[1]
			if ok, seen := derived[k]; !seen || ok {
				derived[k] = !strings.Contains(m[2], "redis.") && isDerived(strings.TrimSpace(m[2]))
			}
		}
		if m := multiAssignRe.FindStringSubmatch(line); m != nil {
			// local base, name = string.match(KEYS[1] or '', '^(emq:{...}:)...'): only a first
			// capture anchored at the start is a prefix of the key; the others are not keys.
			for _, v := range strings.Split(m[1], ",") {
				derived[strings.TrimSpace(v)] = false
			}
			first := strings.TrimSpace(strings.SplitN(m[1], ",", 2)[0])
			expr := strings.TrimSpace(m[2])
			if args, ok := splitArgs(strings.TrimPrefix(expr, "string.match(")); ok && strings.HasPrefix(expr, "string.match(") &&
				len(args) == 2 && strings.HasPrefix(args[1], "'^(") && !strings.Contains(expr, "redis.") {
				derived[first] = isDerived(expr)
			}
		}
		if m := forInRe.FindStringSubmatch(line); m != nil {
			delete(derived, m[1]) // loop variables are ids, never keys
			delete(derived, m[2])
		}
		for _, loc := range callRe.FindAllStringIndex(line, -1) {
			args, ok := splitArgs(line[loc[1]:])
			if !ok || len(args) == 0 {
				problems = append(problems, where+": cannot read the arguments of "+strings.TrimSpace(raw))
				continue
			}
			cmd, err := strconv.Unquote(strings.ReplaceAll(args[0], "'", `"`))
			if err != nil {
				problems = append(problems, where+": the command name must be a literal: "+args[0])
				continue
			}
			positions, known := keyArgs[strings.ToUpper(cmd)]
			if !known {
				problems = append(problems, where+": "+cmd+" is not in the discipline test's command table; add it with its key positions")
				continue
			}
			for _, p := range positions(len(args) - 1) {
				if p >= len(args) {
					continue
				}
				if expr := args[p]; !isDerived(expr) {
					problems = append(problems, where+": "+cmd+" touches "+expr+", which is neither KEYS[i] nor derived from one")
				}
			}
		}
	}
	return problems
}

func derivedExpr(expr string, derived map[string]bool, nKeys int) bool {
	if m := unpackRe.FindStringSubmatch(strings.TrimSpace(expr)); m != nil {
		return derived["[]"+m[1]]
	}
	head := strings.TrimSpace(strings.SplitN(expr, "..", 2)[0])
	if m := keysRefRe.FindStringSubmatch(head); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n >= 1 && n <= nKeys
	}
	if identRe.MatchString(head) {
		return derived[head]
	}
	if m := strCallRe.FindStringSubmatch(head); m != nil {
		args, ok := splitArgs(m[1] + ")")
		// string.match(KEYS[1] or '', ...): the "or ''" only keeps a missing key from raising.
		return ok && len(args) > 0 && derivedExpr(strings.TrimSuffix(args[0], " or ''"), derived, nKeys)
	}
	return false
}

// splitArgs splits the text after an opening parenthesis into its top-level arguments, up to
// the matching close. It knows Lua's quotes and nesting, which is all the bundle uses.
func splitArgs(s string) ([]string, bool) {
	var args []string
	depth, start := 0, 0
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '(' || c == '[' || c == '{':
			depth++
		case c == ')' || c == ']' || c == '}':
			if depth == 0 {
				return append(args, strings.TrimSpace(s[start:i])), true
			}
			depth--
		case c == ',' && depth == 0:
			args = append(args, strings.TrimSpace(s[start:i]))
			start = i + 1
		}
	}
	return nil, false
}

// TestKeyDisciplineCatchesStrays proves the checker can fail: a key from ARGV, an undeclared
// KEYS index and an unknown command are each reported.
func TestKeyDisciplineCatchesStrays(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, body string }{
		{"argv key", "redis.call('DEL', ARGV[1])"},
		{"argv prefix", "local jk = ARGV[1] .. 'x'\nredis.call('HGET', jk, 'a')"},
		{"undeclared index", "redis.call('GET', KEYS[2])"},
		{"unknown command", "redis.call('FLUSHALL')"},
		{"loop id as key", "for _, id in ipairs(ARGV) do redis.call('DEL', id) end"},
		{"dynamic command", "redis.call(ARGV[1], KEYS[1])"},
		{"undeclared argv", "redis.call('SET', KEYS[1], ARGV[2])"},
		{"a later capture as key", "local base, rest = string.match(KEYS[1] or '', '^(emq:{q}:)(.+)$')\nredis.call('DEL', rest)"},
		{"an unanchored capture as key", "local tail, x = string.match(KEYS[1] or '', ':(pending)()$')\nredis.call('DEL', tail)"},
		{"unpack of a table of args", "local t = {}\nt[1] = ARGV[1]\nredis.call('DEL', unpack(t))"},
		{"unpack of a table with one stray", "local t = {}\nt[1] = KEYS[1] .. 'x'\nt[2] = ARGV[1]\nt[3] = KEYS[1] .. 'y'\nredis.call('DEL', unpack(t, 1, 3))"},
		{"unpack of an unknown table", "redis.call('DEL', unpack(t))"},
	} {
		src := "-- KEYS[1] emq:{<q>}:pending  p\n-- ARGV[1] a  bytes  a\n-- REPLY nil\n-- ERROR EMQKEYS  k\n" + tc.body + "\n"
		h, err := lua.ParseHeader(src)
		require.NoError(t, err)
		require.NotEmpty(t, checkScript(&lua.Script{Name: tc.name, Source: src, Header: h}), tc.name)
	}
}

// TestHeaders checks that every declared key and derived key is a grammar form: with its
// placeholders filled in, it parses, and all of a script's keys share one hash tag.
func TestHeaders(t *testing.T) {
	t.Parallel()
	fill := strings.NewReplacer("<q>", "orders", "<table>", "orders", "<topic>", "orders",
		"<id>", keys.NewJobID().String(), "<JOB id>", keys.NewJobID().String(), "<key>", "k", "<name>", "eod", "<lane>", "acme")
	for _, s := range lua.All() {
		require.NotEmpty(t, s.Header.Summary, s.Name)
		require.NotEmpty(t, s.Header.Keys, "%s declares no KEYS", s.Name)
		for _, p := range append(append([]lua.Param{}, s.Header.Keys...), s.Header.Derives...) {
			k, err := keys.Parse(fill.Replace(p.Name))
			require.NoError(t, err, "%s: %s is not a grammar form", s.Name, p.Name)
			require.Equal(t, "orders", k.Name, "%s: %s is not under the script's hash tag", s.Name, p.Name)
			require.NotEmpty(t, p.Doc, "%s: %s is undocumented", s.Name, p.Name)
		}
		for _, p := range s.Header.Args {
			require.NotEmpty(t, p.Doc, "%s: %s is undocumented", s.Name, p.Name)
		}
	}
}

var formatRefRe = regexp.MustCompile(`FORMAT ([a-z]+)`)

// TestFormats: every FORMAT is defined in exactly one script, every other script that names it
// says "see <that script>.lua", and a header that mentions "FORMAT x" anywhere declares x, so
// a reader of one file finds every encoding its arguments, reply and messages carry.
func TestFormats(t *testing.T) {
	t.Parallel()
	definedIn := map[string]string{}
	for _, s := range lua.All() {
		for _, f := range s.Header.Formats {
			if strings.HasPrefix(f.Doc, "see ") {
				continue
			}
			require.Empty(t, definedIn[f.Name], "FORMAT %s is defined in %s and in %s", f.Name, definedIn[f.Name], s.Name)
			definedIn[f.Name] = s.Name
		}
	}
	for _, s := range lua.All() {
		declared := map[string]bool{}
		for _, f := range s.Header.Formats {
			declared[f.Name] = true
			require.NotEmpty(t, definedIn[f.Name], "%s: FORMAT %s is defined nowhere", s.Name, f.Name)
			if definedIn[f.Name] != s.Name {
				require.Equal(t, "see "+definedIn[f.Name]+".lua", f.Doc, "%s: FORMAT %s", s.Name, f.Name)
			}
		}
		header := s.Source[:strings.Index(s.Source, "\nlocal ")]
		for _, m := range formatRefRe.FindAllStringSubmatch(header, -1) {
			if m[1] == "" {
				continue
			}
			require.True(t, declared[m[1]], "%s mentions FORMAT %s but does not declare it", s.Name, m[1])
		}
	}
}

// TestSummaries: each header opens with "<name>: ".
func TestSummaries(t *testing.T) {
	t.Parallel()
	for _, s := range lua.All() {
		require.True(t, strings.HasPrefix(s.Header.Summary, s.Name+": "), "%s: the summary must open with %q", s.Name, s.Name+": ")
	}
}

// TestParseHeaderStrict: the header grammar refuses what it does not define.
func TestParseHeaderStrict(t *testing.T) {
	t.Parallel()
	ok := "-- x: y\n-- KEYS[1] emq:{<q>}:meta  m\n-- ARGV[1] n  uint[0,10]  n\n-- REPLY r\n-- ERROR EMQKEYS  k\n"
	h, err := lua.ParseHeader(ok)
	require.NoError(t, err)
	require.Equal(t, "uint[0,10]", h.Args[0].Rule)
	require.Equal(t, "n", h.Args[0].Doc)
	for name, src := range map[string]string{
		"unknown rule":      strings.Replace(ok, "uint[0,10]", "int", 1),
		"no rule":           strings.Replace(ok, "uint[0,10]  n", "", 1),
		"bounds reversed":   strings.Replace(ok, "uint[0,10]", "uint[10,0]", 1),
		"16 digits":         strings.Replace(ok, "uint[0,10]", "uint[0,1000000000000000]", 1),
		"leading zero":      strings.Replace(ok, "uint[0,10]", "uint[01,10]", 1),
		"ERRORS prose":      strings.Replace(ok, "-- ERROR EMQKEYS  k", "-- ERRORS EMQKEYS k", 1),
		"no ERROR":          strings.Replace(ok, "-- ERROR EMQKEYS  k\n", "", 1),
		"bad code":          strings.Replace(ok, "EMQKEYS", "emqkeys", 1),
		"code twice":        ok + "-- ERROR EMQKEYS  again\n",
		"no REPLY":          strings.Replace(ok, "-- REPLY r\n", "", 1),
		"ARGV out of order": strings.Replace(ok, "ARGV[1]", "ARGV[2]", 1),
		"bad format name":   ok + "-- FORMAT Row  r\n",
		"stray text":        ok + "-- something else\n",
	} {
		_, err := lua.ParseHeader(src)
		require.Error(t, err, name)
	}
	for _, rule := range []string{"jobid", "fence", "token", "id", "id?", "name", "name?", "sha1", "cursor", "row", "row?", "valuerow", "bytes", "uint[0,999999999999999]", "bytes[0,1024]", "bytes[1,1]"} {
		require.NoError(t, lua.CheckRule(rule), rule)
	}
	for _, rule := range []string{"bytes[2,1]", "bytes[01,2]", "bytes[0,1000000000]", "bytes[]", "bytes[lo,hi]", "uint[lo,hi]"} {
		require.Error(t, lua.CheckRule(rule), rule)
	}
	lo, hi, isLength := lua.LengthBounds("bytes[0,1024]")
	require.True(t, isLength)
	require.Equal(t, [2]int{0, 1024}, [2]int{lo, hi})
}
