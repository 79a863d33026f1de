package conformance_test

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
)

// badValues are values a rule refuses. A conforming script answers its role's ARGS code for
// each of them, whatever the other arguments are, before it reads or writes a key.
func badValues(rule string) []string {
	optional := strings.HasSuffix(rule, "?")
	rule = strings.TrimSuffix(rule, "?")
	empty := []string{""}
	if optional {
		empty = nil
	}
	jobid := keys.JobIDFloor(keys.NewJobID().Time())
	value := "\xEC\x01V" + strings.Repeat("A", 16) + strings.Repeat("\x00", 12)
	if lo, hi, ok := lua.UintBounds(rule); ok {
		out := []string{"", "1e3", "0x10", "+1", " 1", "1 ", "-1", "1.0", "1000000000000000", "1_000", "\x001"}
		if lo > 0 {
			out = append(out, strconv.FormatInt(lo-1, 10))
		}
		if hi < lua.MaxUint {
			out = append(out, strconv.FormatInt(hi+1, 10))
		}
		if optional {
			out = out[1:] // "" is admitted
		}
		return out
	}
	if lo, hi, ok := lua.LengthBounds(rule); ok {
		out := []string{strings.Repeat("x", hi+1), strings.Repeat("\xff", hi+1)}
		if lo > 0 {
			out = append(out, strings.Repeat("x", lo-1))
		}
		return out
	}
	switch rule {
	case "fence":
		return []string{"", "0", "01", "1e3", "+1", " 1", "-1", "1.0", "1000000000000000"}
	case "jobid":
		return append(empty, "42", "JOB_", strings.ToLower(jobid), "JOB_8"+jobid[5:], jobid[:29]+"U",
			jobid+"0", jobid[:29], "job_"+jobid[4:], jobid[:29]+"\n")
	case "token":
		return append(empty, strings.Repeat("A", 15), strings.Repeat("A", 17), strings.Repeat("A", 15)+"\n",
			strings.Repeat("A", 15)+"-", strings.Repeat("A", 15)+"\x00", strings.Repeat("A", 14)+"\xc3\xa9")
	case "id":
		return append(empty, strings.Repeat("x", 513), "a\nb", "a\x00b", "a\x7fb", "a\rb", "\x1b")
	case "name":
		return append(empty, strings.Repeat("n", 65), "a b", "a:b", "a{b", "a}b", "\xc3\xa9", "a\x00", "a\n")
	case "sha1":
		return append(empty, strings.Repeat("a", 39), strings.Repeat("A", 40), strings.Repeat("g", 40), strings.Repeat("a", 41))
	case "cursor":
		return []string{"", "-1", "1e3", " 0", "0x10", "18446744073709551616", strings.Repeat("9", 21)}
	case "row", "valuerow":
		out := append(empty, "x", "\xEC\x01L"+strings.Repeat("A", 16), value[:30], "\xEC\x02V"+value[3:],
			"\xEC\x01V"+strings.Repeat("A", 15)+"\n"+value[19:], "\xEC\x01N\x00\x00\x00\x00\x00",
			"\xEC\x01W"+value[3:]+strings.Repeat("\x00", 7), "\xEC\x01W"+strings.Repeat("A", 15)+"\n"+value[19:]+strings.Repeat("\x00", 8),
			"\xEC\x01S"+value[3:]+strings.Repeat("\x00", 8))
		if rule == "valuerow" {
			out = append(out, "\xEC\x01N\x00\x00\x00\x00")
		}
		return out
	}
	return nil // bytes: anything goes
}

// refusals sends, before a successful call, every variant a conforming script must refuse
// (see doc.go), and checks that each is refused with the right code and writes nothing.
func (r *run) refusals(s *script, ks, args []string) {
	where := r.where
	defer func() { r.where = where }()
	before := r.snapshot()
	// The variants are sent in pipelines, not one round trip each: the vectors run on the
	// server's clock (leases, TTLs, run-ats of a few seconds), and a hundred round trips a
	// step, under -race on a loaded machine, took up to 9 s a step and outlasted them (a
	// lease expired within a step that must change nothing, a run-at meant to be the later
	// one came first). Each variant is still checked on its own reply.
	type variant struct {
		what, class string
		ks, args    []string
	}
	var queued []variant
	try := func(what, class string, ks, args []string) {
		queued = append(queued, variant{what, class, ks, args})
	}
	flush := func() {
		if len(queued) == 0 {
			return
		}
		res := r.evalshaMany(s, len(queued), func(i int) ([]string, []string) { return queued[i].ks, queued[i].args })
		for i, v := range queued {
			r.where = fmt.Sprintf("%s, refusal %s", where, v.what)
			r.res.derived++
			want := s.code(v.class)
			e, ok := isErr(res[i].Error())
			switch {
			case !ok:
				r.fail("accepted (want %s)", want)
			case !strings.HasPrefix(e, want+" "):
				r.fail("answered %q, want %s", e, want)
			default:
				r.res.saw(s.name, want)
			}
		}
		queued = queued[:0]
	}
	unchanged := func() {
		flush()
		if after := r.snapshot(); !before.equal(after) {
			r.fail("the keyspace changed: before %v, after %v", before, after)
		}
	}

	// Arguments: each bad value of each rule, on the plain args and the first item's.
	plain := 0
	var starred []lua.Param
	for _, p := range s.header.Args {
		if strings.HasSuffix(p.Name, "*") {
			starred = append(starred, p)
		} else {
			plain++
		}
	}
	for i := range args {
		var p lua.Param
		switch {
		case i < plain:
			p = s.header.Args[i]
		case i < plain+len(starred):
			p = starred[i-plain]
		default:
			continue
		}
		for _, bad := range badValues(p.Rule) {
			mutated := append([]string(nil), args...)
			mutated[i] = bad
			try(fmt.Sprintf("ARGV[%d] %s = %q", i+1, p.Name, bad), "ARGS", ks, mutated)
		}
	}
	try("one ARGV too many", "ARGS", ks, append(append([]string(nil), args...), ""))
	unchanged()

	// Keys: one too few, one too many, each replaced by another type's key of its tag.
	try("one KEYS too few", "KEYS", ks[:len(ks)-1], args)
	try("one KEYS too many", "KEYS", append(append([]string(nil), ks...), ks[0]), args)
	for i, k := range ks {
		parsed, err := keys.Parse(k)
		if err != nil {
			r.fail("KEYS[%d] %q is not a key of the grammar: %v", i+1, k, err)
			continue
		}
		for _, t := range keys.Types() {
			if t == parsed.Type || len(ks) == 1 && twins(t, parsed.Type) {
				continue // a script of one row key takes a table's row and a shard's alike
			}
			if !strings.Contains(t.Form(), "{") && r.tg.cluster && len(ks) > 1 {
				continue // a registry has no hash tag: beside other keys, on a cluster, it is another slot
			}
			mutated := append([]string(nil), ks...)
			mutated[i] = fillForm(t.Form(), parsed.Name)
			if r.tg.cluster && len(ks) > 1 && keys.Slot(mutated[i]) != keys.Slot(ks[i]) {
				continue // a shard's tag is another slot: a cluster refuses the call before the script
			}
			try(fmt.Sprintf("KEYS[%d] = %s", i+1, mutated[i]), "KEYS", mutated, args)
		}
	}
	// Names outside the grammar and keys of two names: another slot, so standalone only.
	if !r.tg.cluster {
		name, _ := keys.Parse(ks[0])
		for _, bad := range []string{strings.Repeat("n", 65), "a b", "a:b", ""} {
			mutated := make([]string, len(ks))
			for i, k := range ks {
				mutated[i] = strings.Replace(k, "{"+name.Name, "{"+bad, 1) // a shard's tag keeps its #<shard>
			}
			try(fmt.Sprintf("KEYS with the name %q", bad), "KEYS", mutated, args)
		}
		for i := 1; i < len(ks); i++ {
			mutated := append([]string(nil), ks...)
			mutated[i] = strings.Replace(ks[i], "{"+name.Name, "{"+name.Name+"x", 1)
			try(fmt.Sprintf("KEYS[%d] of another name", i+1), "KEYS", mutated, args)
		}
	}
	unchanged()

	// Types: each absent key, created with another value type.
	c := r.tg.client
	for i, k := range ks {
		parsed, _ := keys.Parse(k)
		if parsed.Type.Value() == "channel" {
			continue
		}
		n, err := c.Do(r.ctx, c.B().Exists().Key(k).Build()).AsInt64()
		if err != nil || n != 0 {
			continue
		}
		if parsed.Type.Value() == "string" {
			err = c.Do(r.ctx, c.B().Hset().Key(k).FieldValue().FieldValue("wrong", "type").Build()).Error()
		} else {
			err = c.Do(r.ctx, c.B().Set().Key(k).Value("wrong type").Build()).Error()
		}
		if err != nil {
			r.fail("%v", err)
			continue
		}
		try(fmt.Sprintf("KEYS[%d] %s of another type", i+1, k), "TYPE", ks, args)
		flush() // before the key of another type goes
		if err := c.Do(r.ctx, c.B().Del().Key(k).Build()).Error(); err != nil {
			r.fail("%v", err)
		}
	}
	unchanged()
}

// twins reports whether a and b are the same key type of a table and of a table's shard
// (FORMAT shards): the cache scripts take either.
func twins(a, b keys.Type) bool {
	pair := map[keys.Type]keys.Type{keys.Row: keys.ShardRow, keys.Record: keys.ShardRecord, keys.Inval: keys.ShardInval}
	return pair[a] == b || pair[b] == a
}

// isErr reads an error reply's text.
func isErr(err error) (string, bool) {
	if err == nil {
		return "", false
	}
	if e, ok := valkey.IsValkeyErr(err); ok {
		return e.Error(), true
	}
	return err.Error(), true
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
