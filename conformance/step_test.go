package conformance_test

import (
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/keys"
)

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

// evalshaMany sends n calls of s, the i-th with the keys and args of call(i), and answers a
// NOSCRIPT reply with EVAL as evalsha does. The calls whose keys share one slot go in one
// pipeline (split per node on a cluster); the others, without keys or across slots, one by
// one: a cluster client refuses to pipeline them with the rest.
func (r *run) evalshaMany(s *script, n int, call func(i int) (ks, args []string)) []valkey.ValkeyResult {
	c := r.tg.client
	res := make([]valkey.ValkeyResult, n)
	var multi valkey.Commands
	var at []int
	for i := range n {
		ks, args := call(i)
		cmd := c.B().Evalsha().Sha1(s.sha).Numkeys(int64(len(ks))).Key(ks...).Arg(args...).Build()
		if len(ks) == 0 || slices.ContainsFunc(ks, func(k string) bool { return keys.Slot(k) != keys.Slot(ks[0]) }) {
			res[i] = c.Do(r.ctx, cmd)
			continue
		}
		multi, at = append(multi, cmd), append(at, i)
	}
	for j, m := range c.DoMulti(r.ctx, multi...) {
		res[at[j]] = m
	}
	for i := range res {
		if e, ok := valkey.IsValkeyErr(res[i].Error()); ok && e.IsNoScript() {
			ks, args := call(i)
			res[i] = c.Do(r.ctx, c.B().Eval().Script(s.src).Numkeys(int64(len(ks))).Key(ks...).Arg(args...).Build())
		}
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
