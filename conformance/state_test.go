package conformance_test

import (
	"encoding/json"
	"sort"
	"strconv"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/keys"
)

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
