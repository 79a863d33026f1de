package conformance_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/valkey-io/valkey-go"
)

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
