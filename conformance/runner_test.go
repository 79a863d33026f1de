package conformance_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
)

// This file is the runner: it knows the vector format of doc.go and nothing of bus or cache.

// script is one file of the bundle under test, as a client of another runtime sees it.
type script struct {
	name   string
	src    string
	sha    string
	header lua.Header
	role   keys.Role
}

// bundle is the scripts by name.
type bundle map[string]*script

// loadBundle reads ../lua/*.lua, the files themselves, not the bundle compiled into package lua.
func loadBundle() (bundle, error) {
	files, err := filepath.Glob(filepath.Join("..", "lua", "*.lua"))
	if err != nil {
		return nil, err
	}
	b := bundle{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		s, err := newScript(strings.TrimSuffix(filepath.Base(f), ".lua"), string(src))
		if err != nil {
			return nil, err
		}
		b[s.name] = s
	}
	return b, nil
}

func newScript(name, src string) (*script, error) {
	h, err := lua.ParseHeader(src)
	if err != nil {
		return nil, fmt.Errorf("%s.lua: %w", name, err)
	}
	sum := sha1.Sum([]byte(src))
	k, err := keys.Parse(fillForm(h.Keys[0].Name, "t"))
	if err != nil {
		return nil, fmt.Errorf("%s.lua: KEYS[1] %s: %w", name, h.Keys[0].Name, err)
	}
	return &script{name: name, src: src, sha: hex.EncodeToString(sum[:]), header: h, role: k.Role}, nil
}

// with is a copy of b in which one script's source is replaced.
func (b bundle) with(name, src string) (bundle, error) {
	out := bundle{}
	for k, v := range b {
		out[k] = v
	}
	s, err := newScript(name, src)
	if err != nil {
		return nil, err
	}
	out[name] = s
	return out, nil
}

// code is the script's error code for a class of refusal: KEYS, ARGS or TYPE.
func (s *script) code(class string) string {
	for _, e := range s.header.Errors {
		if strings.HasSuffix(e.Name, class) || class == "ARGS" && strings.HasSuffix(e.Name, "ARG") {
			return e.Name
		}
	}
	return "?" + class
}

// fillForm reads a grammar form with every name placeholder as name and every id
// placeholder as a valid id.
func fillForm(form, name string) string {
	form = strings.NewReplacer("<q>", name, "<table>", name, "<topic>", name,
		"<JOB id>", keys.JobIDFloor(time.Unix(0, 0))).Replace(form)
	return placeholderRe.ReplaceAllString(form, "x") // <id>, <key>, and any id a later type adds
}

var placeholderRe = regexp.MustCompile(`<[^<>]+>`)

// target is a server to replay on.
type target struct {
	name    string
	client  valkey.Client
	cluster bool

	once      sync.Once
	primaries []valkey.Client
	err       error
}

// nodes are the primaries: where SCAN sees every key (replicas may lag).
func (tg *target) nodes(ctx context.Context) ([]valkey.Client, error) {
	tg.once.Do(func() {
		for _, n := range tg.client.Nodes() {
			role, err := n.Do(ctx, n.B().Role().Build()).ToArray()
			if err != nil {
				tg.err = err
				return
			}
			if r, _ := role[0].ToString(); r == "master" {
				tg.primaries = append(tg.primaries, n)
			}
		}
	})
	return tg.primaries, tg.err
}

// load makes every node know every script by its SHA1 (SCRIPT LOAD), and checks the name.
func (tg *target) load(ctx context.Context, b bundle) error {
	for _, n := range tg.client.Nodes() {
		for _, s := range b {
			sha, err := n.Do(ctx, n.B().ScriptLoad().Script(s.src).Build()).ToString()
			if err != nil {
				return fmt.Errorf("SCRIPT LOAD %s: %w", s.name, err)
			}
			if sha != s.sha {
				return fmt.Errorf("SCRIPT LOAD %s answered %s, the file's SHA1 is %s", s.name, sha, s.sha)
			}
		}
	}
	return nil
}

// vector is one file of vectors/.
type vector struct {
	Name  string `json:"name"`
	Doc   string `json:"doc"`
	Names []string
	Steps []step `json:"steps"`
	file  string
}

type step struct {
	Note      string               `json:"note"`
	Call      string               `json:"call"`
	Keys      []any                `json:"keys"`
	Args      []any                `json:"args"`
	Cmd       []any                `json:"cmd"`
	Reply     json.RawMessage      `json:"reply"`
	Error     string               `json:"error"`
	Expect    map[string]keyExpect `json:"expect"`
	Scan      []any                `json:"scan"`
	Unchanged bool                 `json:"unchanged"`
	Class     string               `json:"class"`
	Mutate    *bool                `json:"mutate"`
	Mint      int                  `json:"mint"`
	SleepMS   int                  `json:"sleep_ms"`
	Slot      string               `json:"slot"`
	Is        *int                 `json:"is"`
	Subscribe string               `json:"subscribe"`
	Messages  string               `json:"messages"`
	Are       []json.RawMessage    `json:"are"`
	Set       map[string]string    `json:"set"`
	Until     json.RawMessage      `json:"until"`
	Max       int                  `json:"max"`
}

type keyExpect struct {
	Type    string                     `json:"type"`
	Card    *int64                     `json:"card"`
	Members []string                   `json:"members"`
	Scores  map[string]json.RawMessage `json:"scores"`
	HLen    *int64                     `json:"hlen"`
	Fields  map[string]string          `json:"fields"`
	Len     *int64                     `json:"len"`
	Value   json.RawMessage            `json:"value"`
	PTTL    json.RawMessage            `json:"pttl"`
}

func loadVectors() ([]*vector, error) {
	files, err := filepath.Glob(filepath.Join("vectors", "*.json"))
	if err != nil {
		return nil, err
	}
	var out []*vector
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var v struct {
			vector
			Names []string `json:"names"`
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		vec := v.vector
		vec.Names, vec.file = v.Names, filepath.Base(f)
		if len(vec.Names) == 0 {
			vec.Names = []string{"q"}
		}
		out = append(out, &vec)
	}
	return out, nil
}

// result is what one replay of one vector saw.
type result struct {
	fails   []string
	codes   map[string]map[string]bool // script -> error codes it answered
	called  map[string]bool            // scripts called with success
	refused []refusal                  // steps with a class, for the closing table
	derived int                        // refusals derived from successful calls
}

// refusal is one bad-input step: what was sent, what came back, and whether the keyspace
// stayed as it was.
type refusal struct {
	class, call, reply string
	before, after      int // keys under the tag, by SCAN
	same               bool
}

func (r *result) saw(script, code string) {
	if r.codes[script] == nil {
		r.codes[script] = map[string]bool{}
	}
	r.codes[script][code] = true
}

var runSeq atomic.Int64

// replay runs one vector on tg with bundle b.
func replay(ctx context.Context, tg *target, b bundle, v *vector) *result {
	r := &run{ctx: ctx, tg: tg, b: b, v: v, names: map[string]string{}, vars: map[string]string{},
		subs: map[string]*subscription{}, res: &result{codes: map[string]map[string]bool{}, called: map[string]bool{}}}
	var salt [3]byte
	_, _ = rand.Read(salt[:])
	for _, n := range v.Names {
		r.names[n] = fmt.Sprintf("cf%d.%s.%s", runSeq.Add(1), hex.EncodeToString(salt[:]), n)
	}
	defer r.close()
	for i := range v.Steps {
		r.where = fmt.Sprintf("%s step %d", v.file, i+1)
		if v.Steps[i].Note != "" {
			r.where += " (" + v.Steps[i].Note + ")"
		}
		if !r.step(&v.Steps[i]) {
			break // the steps after a failed one build on it
		}
	}
	return r.res
}

type run struct {
	ctx           context.Context
	tg            *target
	b             bundle
	v             *vector
	names         map[string]string
	jobs          []string
	vars          map[string]string
	now           int64 // server TIME (ms) at the start of the step: ${now:+N}
	before, after int64 // server TIME (ms) around the step's call
	started       time.Time
	where         string
	subs          map[string]*subscription
	res           *result
}

func (r *run) fail(format string, args ...any) {
	r.res.fails = append(r.res.fails, r.where+": "+fmt.Sprintf(format, args...))
}

func (r *run) close() {
	for _, s := range r.subs {
		s.cancel()
		<-s.done
	}
}

func (r *run) serverMillis() int64 {
	tm, err := r.tg.client.Do(r.ctx, r.tg.client.B().Time().Build()).AsStrSlice()
	if err != nil || len(tm) != 2 {
		r.fail("TIME: %v", err)
		return 0
	}
	sec, _ := strconv.ParseInt(tm[0], 10, 64)
	usec, _ := strconv.ParseInt(tm[1], 10, 64)
	return sec*1000 + usec/1000
}

var (
	forVarRe = regexp.MustCompile(`\$\{i\}`)
	nameRe   = regexp.MustCompile(`\$([a-z][a-z0-9]*)`)
	exprRe   = regexp.MustCompile(`\$\{([a-z]+):([^{}]*)\}`)
)

// expand reads a string of a vector.
func (r *run) expand(s string) string {
	s = nameRe.ReplaceAllStringFunc(s, func(m string) string {
		if n, ok := r.names[m[1:]]; ok {
			return n
		}
		return m
	})
	return exprRe.ReplaceAllStringFunc(s, func(m string) string {
		p := exprRe.FindStringSubmatch(m)
		switch p[1] {
		case "job":
			n, err := strconv.Atoi(p[2])
			if err != nil || n < 1 || n > len(r.jobs) {
				r.fail("%s: only %d ids were minted", m, len(r.jobs))
				return m
			}
			return r.jobs[n-1]
		case "now":
			n, err := strconv.ParseInt(p[2], 10, 64)
			if err != nil {
				r.fail("%s: not ${now:+N}", m)
			}
			return strconv.FormatInt(r.now+n, 10)
		case "hex":
			b, err := hex.DecodeString(p[2])
			if err != nil {
				r.fail("%s: %v", m, err)
			}
			return string(b)
		case "rep":
			ns, str, _ := strings.Cut(p[2], ":")
			n, err := strconv.Atoi(ns)
			if err != nil {
				r.fail("%s: not ${rep:N:s}", m)
			}
			return strings.Repeat(str, n)
		case "var":
			v, ok := r.vars[p[2]]
			if !ok {
				r.fail("%s: no such variable", m)
			}
			return v
		}
		r.fail("%s: unknown placeholder", m)
		return m
	})
}

// list expands a list of strings and {"for": [a, b], "each": [...]} items.
func (r *run) list(items []any) []string {
	var out []string
	for _, it := range items {
		switch x := it.(type) {
		case string:
			out = append(out, r.expand(x))
		case map[string]any:
			bounds, _ := x["for"].([]any)
			each := x["each"]
			if len(bounds) != 2 || each == nil {
				r.fail("a list item %v is neither a string nor {for, each}", x)
				continue
			}
			from, _ := strconv.Atoi(fmt.Sprint(bounds[0]))
			to, _ := strconv.Atoi(fmt.Sprint(bounds[1]))
			var tmpl []any
			switch e := each.(type) {
			case []any:
				tmpl = e
			default:
				tmpl = []any{e}
			}
			for i := from; i <= to; i++ {
				for _, t := range tmpl {
					s, _ := t.(string)
					out = append(out, r.expand(forVarRe.ReplaceAllString(s, strconv.Itoa(i))))
				}
			}
		default:
			r.fail("a list item %v is neither a string nor {for, each}", x)
		}
	}
	return out
}

// callKeys are a call's KEYS: as given, or the header's with <q> and <table> as $q.
func (r *run) callKeys(s *script, st *step) []string {
	if st.Keys != nil {
		return r.list(st.Keys)
	}
	var out []string
	for _, p := range s.header.Keys {
		if strings.Contains(strings.NewReplacer("<q>", "", "<table>", "").Replace(p.Name), "<") {
			r.fail("%s: KEYS %s has an id: the step must give its keys", s.name, p.Name)
		}
		out = append(out, fillForm(p.Name, r.names[r.v.Names[0]]))
	}
	return out
}

func (r *run) evalsha(s *script, ks, args []string) valkey.ValkeyResult {
	c := r.tg.client
	res := c.Do(r.ctx, c.B().Evalsha().Sha1(s.sha).Numkeys(int64(len(ks))).Key(ks...).Arg(args...).Build())
	if e, ok := valkey.IsValkeyErr(res.Error()); ok && e.IsNoScript() {
		res = c.Do(r.ctx, c.B().Eval().Script(s.src).Numkeys(int64(len(ks))).Key(ks...).Arg(args...).Build())
	}
	return res
}

// step runs one step; false stops the vector.
func (r *run) step(st *step) bool {
	nfail := len(r.res.fails)
	r.before = r.serverMillis()
	r.now, r.started = r.before, time.Now()
	var snapBefore snapshot
	if st.Unchanged || st.Class != "" {
		snapBefore = r.snapshot()
	}
	switch {
	case st.Set != nil:
		for k, v := range st.Set {
			r.vars[k] = r.expand(v)
		}
	case st.Mint > 0:
		for range st.Mint {
			r.jobs = append(r.jobs, keys.NewJobID().String())
		}
	case st.SleepMS > 0:
		time.Sleep(time.Duration(st.SleepMS) * time.Millisecond)
	case st.Slot != "":
		r.slot(st)
	case st.Subscribe != "":
		r.subscribe(r.expand(st.Subscribe))
	case st.Messages != "":
		r.messages(st)
	case st.Call != "":
		s := r.b[st.Call]
		if s == nil {
			r.fail("no script %s in the bundle", st.Call)
			return false
		}
		ks, args := r.callKeys(s, st), r.list(st.Args)
		if st.Error == "" && (st.Mutate == nil || *st.Mutate) {
			r.refusals(s, ks, args)
			r.before, r.started = r.serverMillis(), time.Now()
		}
		res := r.evalsha(s, ks, args)
		// "until": call again, with the variables the reply binds, until the reply matches.
		for n := 1; st.Until != nil && res.Error() == nil; n++ {
			m, _ := res.ToMessage()
			if r.match(st.Until, value(m)) == "" {
				break
			}
			if n >= max(st.Max, 1) {
				r.fail("no reply matched until %s in %d calls", st.Until, n)
				break
			}
			_ = r.match(st.Reply, value(m))
			res = r.evalsha(s, ks, r.list(st.Args))
		}
		r.after = r.serverMillis()
		r.check(s.name, res, st)
		if st.Class != "" {
			r.refused(st, s.name, res, snapBefore)
		}
	case st.Cmd != nil:
		cmd := r.list(st.Cmd)
		res := r.tg.client.Do(r.ctx, r.tg.client.B().Arbitrary(cmd[0]).Keys(cmdKeys(cmd)...).Args(cmdArgs(cmd)...).Build())
		r.after = r.serverMillis()
		r.check("", res, st)
	default:
		if st.Expect == nil && st.Scan == nil {
			r.fail("a step that does nothing")
		}
	}
	if r.after < r.before {
		r.after = r.serverMillis()
	}
	for k, e := range st.Expect {
		r.expectKey(r.expand(k), e)
	}
	if st.Scan != nil {
		want := r.list(st.Scan)
		sort.Strings(want)
		if got := r.scan(); !equalStrings(got, want) {
			r.fail("SCAN of the tag: got %q, want %q", got, want)
		}
	}
	if st.Unchanged && st.Class == "" {
		if after := r.snapshot(); !snapBefore.equal(after) {
			r.fail("the keyspace changed: before %v, after %v", snapBefore, after)
		}
	}
	return len(r.res.fails) == nfail
}

// cmdKeys and cmdArgs split a plain command for routing: its first argument is taken as its
// key when it names a key of the grammar (every command the vectors send has its key first).
func cmdKeys(cmd []string) []string {
	if len(cmd) > 1 {
		if _, err := keys.Parse(cmd[1]); err == nil {
			return cmd[1:2]
		}
	}
	return nil
}

func cmdArgs(cmd []string) []string {
	if len(cmdKeys(cmd)) == 1 {
		return cmd[2:]
	}
	return cmd[1:]
}

func (r *run) check(script string, res valkey.ValkeyResult, st *step) {
	err := res.Error()
	if e, ok := valkey.IsValkeyErr(err); ok {
		code, _, _ := strings.Cut(e.Error(), " ")
		if script != "" {
			r.res.saw(script, code)
		}
		if st.Error == "" {
			r.fail("answered the error %q", e.Error())
		} else if !strings.HasPrefix(e.Error(), r.expand(st.Error)) {
			r.fail("answered the error %q, want one starting with %q", e.Error(), st.Error)
		}
		return
	}
	if err != nil && !valkey.IsValkeyNil(err) {
		r.fail("%v", err)
		return
	}
	if st.Error != "" {
		m, _ := res.ToMessage()
		r.fail("answered %s, want the error %q", show(value(m)), st.Error)
		return
	}
	if script != "" {
		r.res.called[script] = true
	}
	if st.Reply != nil {
		m, _ := res.ToMessage()
		if msg := r.match(st.Reply, value(m)); msg != "" {
			r.fail("reply %s: %s", show(value(m)), msg)
		}
	}
}

// value turns a reply into nil, int64, string or []any.
func value(m valkey.ValkeyMessage) any {
	switch {
	case m.IsNil():
		return nil
	case m.IsInt64():
		n, _ := m.AsInt64()
		return n
	case m.IsFloat64():
		f, _ := m.AsFloat64()
		return f
	case m.IsArray():
		a, _ := m.ToArray()
		out := make([]any, len(a))
		for i := range a {
			out[i] = value(a[i])
		}
		return out
	}
	if s, err := m.ToString(); err == nil {
		return s
	}
	v, _ := m.ToAny()
	return v
}

func show(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// match compares a value with a <match>; "" when it matches.
func (r *run) match(raw json.RawMessage, got any) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var want any
	if err := dec.Decode(&want); err != nil {
		return "the vector's match does not parse: " + err.Error()
	}
	return r.matchValue(want, got)
}

func (r *run) matchValue(want, got any) string {
	switch w := want.(type) {
	case nil:
		if got != nil {
			return fmt.Sprintf("want nil, got %s", show(got))
		}
	case json.Number:
		n, err := w.Int64()
		g, isInt := got.(int64)
		if f, ok := got.(float64); ok && f == float64(int64(f)) { // a zset score
			g, isInt = int64(f), true
		}
		if err != nil || !isInt || g != n {
			return fmt.Sprintf("want %s, got %s", w, show(got))
		}
	case string:
		if g, ok := got.(string); !ok || g != r.expand(w) {
			return fmt.Sprintf("want %q, got %s", r.expand(w), show(got))
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Sprintf("want %d elements, got %s", len(w), show(got))
		}
		for i := range w {
			if msg := r.matchValue(w[i], g[i]); msg != "" {
				return fmt.Sprintf("[%d]: %s", i, msg)
			}
		}
	case map[string]any:
		return r.matchObject(w, got)
	default:
		return fmt.Sprintf("a match of type %T", want)
	}
	return ""
}

func (r *run) matchObject(w map[string]any, got any) string {
	num := func(v any) int64 {
		n, _ := strconv.ParseInt(r.expand(fmt.Sprint(v)), 10, 64)
		return n
	}
	asInt := func(got any) (int64, bool) {
		switch g := got.(type) {
		case int64:
			return g, true
		case float64:
			return int64(g), g == float64(int64(g))
		case string: // a score, or a number in a bulk string
			f, err := strconv.ParseFloat(g, 64)
			return int64(f), err == nil
		}
		return 0, false
	}
	switch {
	case w["time"] != nil:
		d := num(w["time"])
		g, ok := asInt(got)
		if !ok || g < r.before+d || g > r.after+d {
			return fmt.Sprintf("want server TIME + %d, in [%d, %d], got %s", d, r.before+d, r.after+d, show(got))
		}
	case w["between"] != nil:
		b, _ := w["between"].([]any)
		g, ok := asInt(got)
		if len(b) != 2 || !ok || g < num(b[0]) || g > num(b[1]) {
			return fmt.Sprintf("want a number in %v, got %s", b, show(got))
		}
	case w["re"] != nil:
		re, err := regexp.Compile(fmt.Sprint(w["re"]))
		g, ok := got.(string)
		if err != nil || !ok || !re.MatchString(g) {
			return fmt.Sprintf("want a string matching %v, got %s", w["re"], show(got))
		}
		if w["bind"] != nil {
			r.vars[fmt.Sprint(w["bind"])] = g
		}
	case w["bind"] != nil:
		switch g := got.(type) {
		case string:
			r.vars[fmt.Sprint(w["bind"])] = g
		default:
			r.vars[fmt.Sprint(w["bind"])] = fmt.Sprint(g)
		}
	case w["len"] != nil:
		g, ok := got.([]any)
		if !ok || int64(len(g)) != num(w["len"]) {
			return fmt.Sprintf("want an array of %v, got %d elements", w["len"], len(g))
		}
	case w["any"] != nil:
	default:
		return fmt.Sprintf("unknown match %v", w)
	}
	return ""
}

func (r *run) do(cmd valkey.Completed) *valkey.ValkeyMessage {
	m, err := r.tg.client.Do(r.ctx, cmd).ToMessage()
	if err != nil && !valkey.IsValkeyNil(err) {
		r.fail("%v", err)
	}
	return &m
}

func (r *run) expectKey(k string, e keyExpect) {
	c := r.tg.client
	typ, _ := r.do(c.B().Type().Key(k).Build()).ToString()
	if e.Type != "" && typ != e.Type {
		r.fail("%s: type %s, want %s", k, typ, e.Type)
		return
	}
	intOf := func(cmd valkey.Completed) int64 {
		m := r.do(cmd)
		n, _ := m.AsInt64()
		return n
	}
	if e.Card != nil {
		if n := intOf(c.B().Zcard().Key(k).Build()); n != *e.Card {
			r.fail("%s: ZCARD %d, want %d", k, n, *e.Card)
		}
	}
	if e.Members != nil {
		got, _ := r.do(c.B().Zrange().Key(k).Min("0").Max("-1").Build()).AsStrSlice()
		if want := r.list(toAny(e.Members)); !equalStrings(got, want) {
			r.fail("%s: members %q, want %q", k, got, want)
		}
	}
	for member, m := range e.Scores {
		member = r.expand(member)
		s := r.do(c.B().Zscore().Key(k).Member(member).Build())
		if msg := r.match(m, value(*s)); msg != "" {
			r.fail("%s: ZSCORE %s: %s", k, member, msg)
		}
	}
	if e.HLen != nil {
		if n := intOf(c.B().Hlen().Key(k).Build()); n != *e.HLen {
			r.fail("%s: HLEN %d, want %d", k, n, *e.HLen)
		}
	}
	if e.Fields != nil {
		got, _ := r.do(c.B().Hgetall().Key(k).Build()).AsStrMap()
		want := map[string]string{}
		for f, v := range e.Fields {
			want[r.expand(f)] = r.expand(v)
		}
		if show(got) != show(want) {
			r.fail("%s: HGETALL %s, want %s", k, show(got), show(want))
		}
	}
	if e.Len != nil {
		if n := intOf(c.B().Llen().Key(k).Build()); n != *e.Len {
			r.fail("%s: LLEN %d, want %d", k, n, *e.Len)
		}
	}
	if e.Value != nil {
		if msg := r.match(e.Value, value(*r.do(c.B().Get().Key(k).Build()))); msg != "" {
			r.fail("%s: GET: %s", k, msg)
		}
	}
	if e.PTTL != nil {
		got := intOf(c.B().Pttl().Key(k).Build())
		elapsed := time.Since(r.started).Milliseconds() + 1
		var of struct {
			Of *int64 `json:"of"`
		}
		var span []int64
		var exact int64
		switch {
		case json.Unmarshal(e.PTTL, &span) == nil && len(span) == 2:
			if got < span[0] || got > span[1] {
				r.fail("%s: PTTL %d, want [%d, %d]", k, got, span[0], span[1])
			}
		case json.Unmarshal(e.PTTL, &of) == nil && of.Of != nil:
			if got > *of.Of || got < *of.Of-elapsed {
				r.fail("%s: PTTL %d, want %d of %d (%d ms passed)", k, got, *of.Of, *of.Of, elapsed)
			}
		case json.Unmarshal(e.PTTL, &exact) == nil:
			if got != exact {
				r.fail("%s: PTTL %d, want %d", k, got, exact)
			}
		default:
			r.fail("%s: pttl %s is none of [lo, hi], {\"of\": N}, N", k, e.PTTL)
		}
	}
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i := range s {
		out[i] = s[i]
	}
	return out
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// scan is every key under the vector's hash tags, sorted: SCAN MATCH *{<name>}* and, for the
// shards of a cache table, *{<name>#*}* on every primary.
func (r *run) scan() []string {
	nodes, err := r.tg.nodes(r.ctx)
	if err != nil {
		r.fail("ROLE: %v", err)
		return nil
	}
	var out []string
	for _, name := range r.names {
		for _, n := range nodes {
			for _, pattern := range []string{"*{" + name + "}*", "*{" + name + "#*}*"} {
				var cursor uint64
				for {
					e, err := n.Do(r.ctx, n.B().Scan().Cursor(cursor).Match(pattern).Count(1000).Build()).AsScanEntry()
					if err != nil {
						r.fail("SCAN: %v", err)
						return nil
					}
					out = append(out, e.Elements...)
					if cursor = e.Cursor; cursor == 0 {
						break
					}
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// snapshot is every key under the tags with its type and its whole value.
type snapshot map[string]string

func (r *run) snapshot() snapshot {
	c := r.tg.client
	ks := r.scan()
	out := snapshot{}
	if len(ks) == 0 {
		return out
	}
	cmds := make(valkey.Commands, 0, 2*len(ks))
	for _, k := range ks {
		cmds = append(cmds, c.B().Type().Key(k).Build(), c.B().Pttl().Key(k).Build())
	}
	res := c.DoMulti(r.ctx, cmds...)
	types := make([]string, len(ks))
	reads := make(valkey.Commands, len(ks))
	for i, k := range ks {
		types[i], _ = res[2*i].ToString()
		reads[i] = readCmd(c, k, types[i])
	}
	vals := c.DoMulti(r.ctx, reads...)
	for i, k := range ks {
		ttl, _ := res[2*i+1].AsInt64()
		m, _ := vals[i].ToMessage()
		out[k] = types[i] + " " + show(value(m)) + " ttl:" + strconv.FormatBool(ttl >= 0)
	}
	return out
}

// readCmd reads a key's whole value in a form that does not depend on its encoding.
func readCmd(c valkey.Client, k, typ string) valkey.Completed {
	switch typ {
	case "hash":
		return c.B().Hgetall().Key(k).Build()
	case "zset":
		return c.B().Zrange().Key(k).Min("0").Max("-1").Withscores().Build()
	case "list":
		return c.B().Lrange().Key(k).Start(0).Stop(-1).Build()
	}
	return c.B().Get().Key(k).Build()
}

func (a snapshot) equal(b snapshot) bool { return show(a) == show(b) }

func (r *run) slot(st *step) {
	if st.Is == nil {
		r.fail("slot without is")
		return
	}
	k := r.expand(st.Slot)
	if got := int(keys.Slot(k)); got != *st.Is {
		r.fail("keys.Slot(%q) = %d, want %d", k, got, *st.Is)
	}
	if r.tg.cluster {
		n, err := r.tg.client.Do(r.ctx, r.tg.client.B().ClusterKeyslot().Key(k).Build()).AsInt64()
		if err != nil || int(n) != *st.Is {
			r.fail("CLUSTER KEYSLOT %q = %d (%v), want %d", k, n, err, *st.Is)
		}
	}
}

// subscription collects a shard channel's messages.
type subscription struct {
	mu     sync.Mutex
	msgs   []string
	cancel context.CancelFunc
	done   chan struct{}
}

func (r *run) subscribe(ch string) {
	ctx, cancel := context.WithCancel(r.ctx)
	s := &subscription{cancel: cancel, done: make(chan struct{})}
	ready := make(chan struct{})
	var once sync.Once
	ctx = valkey.WithOnSubscriptionHook(ctx, func(valkey.PubSubSubscription) { once.Do(func() { close(ready) }) })
	go func() {
		defer close(s.done)
		_ = r.tg.client.Receive(ctx, r.tg.client.B().Ssubscribe().Channel(ch).Build(), func(m valkey.PubSubMessage) {
			s.mu.Lock()
			s.msgs = append(s.msgs, m.Message)
			s.mu.Unlock()
		})
	}()
	select {
	case <-ready:
	case <-time.After(5 * time.Second):
		r.fail("SSUBSCRIBE %s: not subscribed within 5 s", ch)
	}
	r.subs[ch] = s
}

func (r *run) messages(st *step) {
	ch := r.expand(st.Messages)
	s := r.subs[ch]
	if s == nil {
		r.fail("no subscription to %s", ch)
		return
	}
	var got []string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		s.mu.Lock()
		got = append(got[:0], s.msgs...)
		s.mu.Unlock()
		if len(got) >= len(st.Are) || time.Now().After(deadline) {
			break
		}
	}
	if len(got) != len(st.Are) {
		r.fail("%s: %d messages %q, want %d", ch, len(got), got, len(st.Are))
		return
	}
	for i := range got {
		if msg := r.match(st.Are[i], got[i]); msg != "" {
			r.fail("%s: message %d %q: %s", ch, i+1, got[i], msg)
		}
	}
}

// refused records a bad-input step for the closing table.
func (r *run) refused(st *step, script string, res valkey.ValkeyResult, before snapshot) {
	after := r.snapshot()
	reply := ""
	if e, ok := valkey.IsValkeyErr(res.Error()); ok {
		reply = e.Error()
	} else {
		m, _ := res.ToMessage()
		reply = show(value(m))
	}
	if !before.equal(after) {
		r.fail("a refused call changed the keyspace: before %v, after %v", before, after)
	}
	r.res.refused = append(r.res.refused, refusal{class: st.Class, call: script, reply: reply,
		before: len(before), after: len(after), same: before.equal(after)})
}
