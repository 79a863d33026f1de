package keys_test

import (
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/keys"
)

func TestSlotVectors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		key  string
		want uint16
	}{
		{"{orders}", 105},
		{"{fills}", 4165},
		{"{payments}", 8507},
		{"123456789", 12739},
		{"emq:{orders}:pending", 105},
		{"ecc:{fills}:42", 4165},
		{"foo{}{bar}", keys.Slot("foo{}{bar}")}, // empty first tag: whole key
	} {
		require.Equal(t, tc.want, keys.Slot(tc.key), tc.key)
	}
	q := keys.MustQueue("orders")
	j, err := q.Job(keys.NewJobID())
	require.NoError(t, err)
	p, err := q.Periodic("eod.report")
	require.NoError(t, err)
	e, err := q.Errors(keys.NewJobID())
	require.NoError(t, err)
	r, err := q.Result(keys.NewJobID())
	require.NoError(t, err)
	lp, err := q.LanePending("acme")
	require.NoError(t, err)
	ll, err := q.LaneLog("acme")
	require.NoError(t, err)
	for _, k := range []string{q.Pending(), q.Active(), q.Schedule(), q.Dead(), q.Meta(), q.Wake(), j, p, q.Periodics(), e, r, q.Workers(), keys.MustTable("orders").Stats(),
		q.Flow(), q.Lanes(), q.LaneActive(), q.LaneReady(), q.LaneWait(), q.JobLane(), q.Urgent(), q.FlowLog(), lp, ll} {
		require.Equal(t, uint16(105), keys.Slot(k), "F5: every key of {orders} answers slot 105: %s", k)
	}
}

func TestNameRules(t *testing.T) {
	t.Parallel()
	good := []string{"a", "orders", "A-b_c.9", strings.Repeat("x", 64)}
	for _, n := range good {
		require.NoError(t, keys.ValidateName(n), n)
	}
	for _, tc := range []struct{ name, rule string }{
		{"", "empty"},
		{strings.Repeat("x", 65), "65 bytes"},
		{"a{b", `"{"`},
		{"a}b", `"}"`},
		{"a:b", `":"`},
		{"a b", `" "`},
		{"a\x00", `"\x00"`},
		{"é", `"\xc3"`},
	} {
		err := keys.ValidateName(tc.name)
		require.ErrorIs(t, err, keys.ErrInvalid, tc.name)
		require.Contains(t, err.Error(), tc.rule)
		require.Contains(t, err.Error(), "[A-Za-z0-9_.-]", "the error names the rule")
		_, err = keys.NewQueue(tc.name)
		require.ErrorIs(t, err, keys.ErrInvalid)
		_, err = keys.NewTable(tc.name)
		require.ErrorIs(t, err, keys.ErrInvalid)
		_, err = keys.TopicChannel(tc.name)
		require.ErrorIs(t, err, keys.ErrInvalid)
		_, err = keys.MustQueue("q").Periodic(tc.name)
		require.ErrorIs(t, err, keys.ErrInvalid)
		require.Contains(t, err.Error(), tc.rule, "a schedule name follows the name rule")
		_, err = keys.Parse("emq:{q}:periodic:" + tc.name)
		require.ErrorIs(t, err, keys.ErrInvalid, "%q", tc.name)
	}
}

func TestIDRules(t *testing.T) {
	t.Parallel()
	tb := keys.MustTable("t")
	for _, id := range []string{"1", "a:b:{c}", "ünïcode", strings.Repeat("z", 512)} {
		k, err := tb.Row(id)
		require.NoError(t, err)
		require.Equal(t, "ecc:{t}:"+id, k)
	}
	for _, id := range []string{"", strings.Repeat("z", 513), "a\nb", "\x7f", "\x00"} {
		_, err := tb.Row(id)
		require.ErrorIs(t, err, keys.ErrInvalid, "%q", id)
		_, err = keys.MustQueue("q").Unique(id)
		require.ErrorIs(t, err, keys.ErrInvalid, "%q", id)
	}
}

func TestBuilders(t *testing.T) {
	t.Parallel()
	q := keys.MustQueue("orders")
	require.Equal(t, "emq:{orders}:pending", q.Pending())
	require.Equal(t, "emq:{orders}:active", q.Active())
	require.Equal(t, "emq:{orders}:schedule", q.Schedule())
	require.Equal(t, "emq:{orders}:dead", q.Dead())
	require.Equal(t, "emq:{orders}:meta", q.Meta())
	require.Equal(t, "emq:{orders}:wake", q.Wake())
	require.Equal(t, "emq:{orders}:job:", q.JobPrefix())
	u, err := q.Unique("order-17")
	require.NoError(t, err)
	require.Equal(t, "emq:{orders}:uniq:order-17", u)
	id := keys.NewJobID()
	j, err := q.Job(id)
	require.NoError(t, err)
	require.Equal(t, "emq:{orders}:job:"+id.String(), j)

	_, err = q.Job(keys.JobID{})
	require.ErrorIs(t, err, keys.ErrInvalid, "the job-row builder refuses an unbranded id")
	e, err := q.Errors(id)
	require.NoError(t, err)
	require.Equal(t, "emq:{orders}:errors:"+id.String(), e)
	r, err := q.Result(id)
	require.NoError(t, err)
	require.Equal(t, "emq:{orders}:result:"+id.String(), r)
	_, err = q.Errors(keys.JobID{})
	require.ErrorIs(t, err, keys.ErrInvalid, "the failure history builder refuses an unbranded id")
	_, err = q.Result(keys.JobID{})
	require.ErrorIs(t, err, keys.ErrInvalid, "the result builder refuses an unbranded id")
	p, err := q.Periodic("eod.report")
	require.NoError(t, err)
	require.Equal(t, "emq:{orders}:periodic:eod.report", p)
	require.Equal(t, "emq:{orders}:periodic:", q.PeriodicPrefix())
	require.Equal(t, "emq:{orders}:periodics", q.Periodics())
	require.Equal(t, "emq:{orders}:workers", q.Workers())
	require.Equal(t, "emq:queues", keys.QueueRegistry())
	require.Equal(t, "ecc:tables", keys.TableRegistry())

	tb := keys.MustTable("products")
	require.Equal(t, "ecc:{products}", tb.Record())
	require.Equal(t, "emq:{products}:inval", tb.Inval())
	require.Equal(t, "ecc:{products}:", tb.RowPrefix())
	require.Equal(t, "ecc:{products}#stats", tb.Stats())
	ch, err := keys.TopicChannel("news")
	require.NoError(t, err)
	require.Equal(t, "emq:{news}:topic", ch)

	require.Panics(t, func() { keys.Queue{}.Pending() })
	require.Panics(t, func() { keys.Table{}.Record() })
	_, err = keys.Parse(q.JobPrefix())
	require.Error(t, err, "a prefix is not a key")
	_, err = keys.Parse(q.PeriodicPrefix())
	require.Error(t, err, "a prefix is not a key")

	for k, want := range map[string]string{
		q.Flow(): "emq:{orders}:flow", q.Lanes(): "emq:{orders}:lanes", q.LaneActive(): "emq:{orders}:laneactive",
		q.LaneReady(): "emq:{orders}:laneready", q.LaneWait(): "emq:{orders}:lanewait", q.JobLane(): "emq:{orders}:joblane",
		q.Urgent(): "emq:{orders}:urgent", q.FlowLog(): "emq:{orders}:flowlog",
		q.LanePendingPrefix(): "emq:{orders}:lanepending:", q.LaneLogPrefix(): "emq:{orders}:lanelog:",
	} {
		require.Equal(t, want, k)
	}
	lp, err := q.LanePending("tenant-7")
	require.NoError(t, err)
	require.Equal(t, "emq:{orders}:lanepending:tenant-7", lp)
	ll, err := q.LaneLog("tenant-7")
	require.NoError(t, err)
	require.Equal(t, "emq:{orders}:lanelog:tenant-7", ll)
	for _, bad := range []string{"", "a:b", "a{b}", strings.Repeat("x", 65)} {
		_, err = q.LanePending(bad)
		require.ErrorIs(t, err, keys.ErrInvalid, "lane %q", bad)
		require.Contains(t, err.Error(), "[A-Za-z0-9_.-]", "the error names the rule")
		_, err = q.LaneLog(bad)
		require.ErrorIs(t, err, keys.ErrInvalid, "lane %q", bad)
		err = keys.ValidateLane(bad)
		require.ErrorIs(t, err, keys.ErrInvalid, "lane %q", bad)
		require.Contains(t, err.Error(), "lane")
	}
	require.NoError(t, keys.ValidateLane("tenant-7"))
	for _, prefix := range []string{q.LanePendingPrefix(), q.LaneLogPrefix()} {
		_, err = keys.Parse(prefix)
		require.Error(t, err, "a prefix is not a key")
	}
}

func TestTypeNames(t *testing.T) {
	t.Parallel()
	for typ, want := range map[keys.Type]string{
		keys.Row: "row", keys.Record: "record", keys.Inval: "inval", keys.Pending: "pending",
		keys.Active: "active", keys.Schedule: "schedule", keys.Dead: "dead", keys.Meta: "meta",
		keys.Wake: "wake", keys.Job: "job", keys.Unique: "uniq", keys.Topic: "topic",
		keys.Periodic: "periodic", keys.Periodics: "periodics", keys.Errors: "errors", keys.Result: "result",
		keys.Queues: "queues", keys.Tables: "tables", keys.Workers: "workers", keys.TableStats: "stats",
		keys.ShardRow: "shard-row", keys.ShardRecord: "shard-record", keys.ShardInval: "shard-inval",
		keys.Flow: "flow", keys.Lanes: "lanes", keys.LaneActive: "laneactive", keys.LaneReady: "laneready",
		keys.LaneWait: "lanewait", keys.JobLane: "joblane", keys.Urgent: "urgent", keys.FlowLog: "flowlog",
		keys.LanePending: "lanepending", keys.LaneLog: "lanelog",
	} {
		require.Equal(t, want, typ.String())
	}
	require.Equal(t, "Type(0)", keys.Type(0).String())
	require.Equal(t, "Type(99)", keys.Type(99).String())
}

// randomKey builds one random builder output and the Key it must parse to.
func randomKey(r *rand.Rand) (string, keys.Key) {
	name := randomString(r, 1+r.IntN(keys.MaxNameLen), "abcXYZ019_.-")
	q, t := keys.MustQueue(name), keys.MustTable(name)
	switch r.IntN(33) {
	case 20, 21, 22:
		n := r.IntN(keys.MaxShards)
		sh, err := t.Shard(n)
		if err != nil {
			panic(err)
		}
		switch r.IntN(3) {
		case 0:
			id := randomID(r)
			k, _ := sh.Row(id)
			return k, keys.Key{Role: keys.Cache, Name: name, Type: keys.ShardRow, ID: id, Shard: n}
		case 1:
			return sh.Record(), keys.Key{Role: keys.Cache, Name: name, Type: keys.ShardRecord, Shard: n}
		default:
			return sh.Inval(), keys.Key{Role: keys.Bus, Name: name, Type: keys.ShardInval, Shard: n}
		}
	case 0:
		id := randomID(r)
		k, _ := t.Row(id)
		return k, keys.Key{Role: keys.Cache, Name: name, Type: keys.Row, ID: id}
	case 1:
		return t.Record(), keys.Key{Role: keys.Cache, Name: name, Type: keys.Record}
	case 2:
		return t.Inval(), keys.Key{Role: keys.Bus, Name: name, Type: keys.Inval}
	case 3:
		return q.Pending(), keys.Key{Role: keys.Bus, Name: name, Type: keys.Pending}
	case 4:
		return q.Active(), keys.Key{Role: keys.Bus, Name: name, Type: keys.Active}
	case 5:
		return q.Schedule(), keys.Key{Role: keys.Bus, Name: name, Type: keys.Schedule}
	case 6:
		return q.Dead(), keys.Key{Role: keys.Bus, Name: name, Type: keys.Dead}
	case 7:
		return q.Meta(), keys.Key{Role: keys.Bus, Name: name, Type: keys.Meta}
	case 8:
		return q.Wake(), keys.Key{Role: keys.Bus, Name: name, Type: keys.Wake}
	case 9:
		id := keys.NewJobID()
		k, _ := q.Job(id)
		return k, keys.Key{Role: keys.Bus, Name: name, Type: keys.Job, ID: id.String()}
	case 10:
		id := randomID(r)
		k, _ := q.Unique(id)
		return k, keys.Key{Role: keys.Bus, Name: name, Type: keys.Unique, ID: id}
	case 11:
		sched := randomString(r, 1+r.IntN(keys.MaxNameLen), "abcXYZ019_.-")
		k, _ := q.Periodic(sched)
		return k, keys.Key{Role: keys.Bus, Name: name, Type: keys.Periodic, ID: sched}
	case 12:
		return q.Periodics(), keys.Key{Role: keys.Bus, Name: name, Type: keys.Periodics}
	case 13:
		return q.Workers(), keys.Key{Role: keys.Bus, Name: name, Type: keys.Workers}
	case 14:
		return t.Stats(), keys.Key{Role: keys.Cache, Name: name, Type: keys.TableStats}
	case 15:
		return keys.QueueRegistry(), keys.Key{Role: keys.Bus, Type: keys.Queues}
	case 16:
		return keys.TableRegistry(), keys.Key{Role: keys.Cache, Type: keys.Tables}
	case 17:
		id := keys.NewJobID()
		k, _ := q.Errors(id)
		return k, keys.Key{Role: keys.Bus, Name: name, Type: keys.Errors, ID: id.String()}
	case 18:
		id := keys.NewJobID()
		k, _ := q.Result(id)
		return k, keys.Key{Role: keys.Bus, Name: name, Type: keys.Result, ID: id.String()}
	case 23, 24:
		lane := randomString(r, 1+r.IntN(keys.MaxNameLen), "abcXYZ019_.-")
		if r.IntN(2) == 0 {
			k, _ := q.LanePending(lane)
			return k, keys.Key{Role: keys.Bus, Name: name, Type: keys.LanePending, ID: lane}
		}
		k, _ := q.LaneLog(lane)
		return k, keys.Key{Role: keys.Bus, Name: name, Type: keys.LaneLog, ID: lane}
	case 25, 26, 27, 28, 29, 30, 31, 32:
		typ := []keys.Type{keys.Flow, keys.Lanes, keys.LaneActive, keys.LaneReady, keys.LaneWait, keys.JobLane, keys.Urgent, keys.FlowLog}[r.IntN(8)]
		k := keys.Key{Role: keys.Bus, Name: name, Type: typ}
		return k.String(), k
	default:
		k, _ := keys.TopicChannel(name)
		return k, keys.Key{Role: keys.Bus, Name: name, Type: keys.Topic}
	}
}

func randomID(r *rand.Rand) string {
	// Ids may hold anything but control bytes, including the grammar's own punctuation.
	return randomString(r, 1+r.IntN(keys.MaxIDLen), "az09:{}job:_ é")
}

func randomString(r *rand.Rand, n int, alphabet string) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(b)
}

func TestParseRoundTrip(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 100_000 {
		s, want := randomKey(r)
		got, err := keys.Parse(s)
		require.NoError(t, err, "case %d: %q", i, s)
		require.Equal(t, want, got, "case %d", i)
		require.Equal(t, s, got.String(), "case %d", i)
	}
}

func TestParseRefuses(t *testing.T) {
	t.Parallel()
	id := keys.NewJobID().String()
	for _, s := range []string{
		"", "emq:", "ecc:", "emq:{}", "emq:{q}", "emq:{q}:", "emq:{q}:nope", "emq:{q}:pendingx",
		"emq:{q}:job:", "emq:{q}:job:JOB_x", "emq:{q}:job:" + strings.ToLower(id), "emq:{q}:uniq:",
		"ecc:{t}:", "ecc:{t}x", "ecc:{t", "ecc:t:1", "ECC:{t}:1", "emq:{a b}:pending", "ecc:{t}:a\nb",
		"other:{q}:pending", "emq:{q}:job:" + id + "x", "emq:{q}:job:JOB_8" + id[5:],
		"emq:{q}:periodic:", "emq:{q}:periodic", "emq:{q}:periodicsx", "emq:{q}:periodic:a:b",
		"emq:{q}:periodic:a b", "emq:{q}:periodic:" + strings.Repeat("x", 65), "emq:{q}:periodic:{a}",
		"emq:{q}:lanepending:", "emq:{q}:lanepending", "emq:{q}:lanepending:a:b", "emq:{q}:lanelog:",
		"emq:{q}:lanelog:a b", "emq:{q}:lanesx", "emq:{q}:lane", "emq:{q}:flow:x", "emq:{q}:lanepending:" + strings.Repeat("x", 65),
		"emq:{q}:workersx", "emq:{q}:workers:", "ecc:{t}#stat", "ecc:{t}#statsx", "ecc:{t}#", "emq:{q}#stats",
		"emq:queue", "emq:queues:", "emq:queuesx", "ecc:table", "ecc:tablesx", "ecc:queues", "emq:tables", "ecc:{t}:",
		"emq:{q}:", "emq:{queues}", "ECC:tables",
		"emq:{q}:errors:", "emq:{q}:errors", "emq:{q}:errors:x", "emq:{q}:errors:" + strings.ToLower(id),
		"emq:{q}:errors:" + id + "x", "emq:{q}:result:", "emq:{q}:result", "emq:{q}:result:order-17",
		"emq:{q}:result:" + id[:29], "emq:{q}:resultx", "ecc:{t}x:errors:" + id,
		"ecc:{t#}", "ecc:{t#}:1", "ecc:{t#01}", "ecc:{t#00}:1", "ecc:{t#256}", "ecc:{t#1000}:1", "ecc:{t#-1}",
		"ecc:{t#1#2}", "ecc:{#1}", "ecc:{t#x}:1", "ecc:{t#1 }", "emq:{t#1}:pending", "emq:{t#1}:topic",
		"emq:{t#1}:job:" + id, "emq:{t#1}:errors:" + id, "emq:{t#1}:result:" + id, "emq:{t#}:inval", "emq:{t#07}:inval", "ecc:{" + strings.Repeat("x", 65) + "#1}",
	} {
		_, err := keys.Parse(s)
		require.ErrorIs(t, err, keys.ErrInvalid, "%q", s)
	}
}

func FuzzParse(f *testing.F) {
	f.Add("emq:{orders}:pending")
	f.Add("ecc:{t}:id")
	f.Add("emq:{q}:job:" + keys.NewJobID().String())
	f.Add("emq:{q}:periodic:eod.report")
	f.Add("emq:{q}:periodics")
	f.Add("emq:{q}:lanepending:acme")
	f.Add("emq:{q}:laneready")
	f.Add("emq:queues")
	f.Add("ecc:{t}#stats")
	f.Add("emq:{q}:errors:" + keys.NewJobID().String())
	f.Add("emq:{q}:result:" + keys.NewJobID().String())
	f.Add("ecc:{t#3}:id")
	f.Add("emq:{t#255}:inval")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := keys.Parse(s)
		if err != nil {
			if !errors.Is(err, keys.ErrInvalid) {
				t.Fatalf("Parse(%q) error does not wrap ErrInvalid: %v", s, err)
			}
			return
		}
		if got := k.String(); got != s {
			t.Fatalf("Parse(%q).String() = %q", s, got)
		}
		if k.Name == "" {
			if s != keys.QueueRegistry() && s != keys.TableRegistry() {
				t.Fatalf("Parse(%q) has no name but is no registry", s)
			}
			return
		}
		if keys.Slot(s) != keys.Slot("{"+k.Tag()+"}") {
			t.Fatalf("%q does not hash by its tag", s)
		}
	})
}

// TestShards: a sharded table's keys carry {<table>#<shard>}, parse back to the table's name
// and the shard, and cannot be taken for another table's: "#" is no name byte.
func TestShards(t *testing.T) {
	t.Parallel()
	tb := keys.MustTable("orders")
	_, sharded := tb.ShardIndex()
	require.False(t, sharded)
	s3, err := tb.Shard(3)
	require.NoError(t, err)
	i, sharded := s3.ShardIndex()
	require.True(t, sharded)
	require.Equal(t, 3, i)
	require.Equal(t, "orders", s3.Name())
	row, err := s3.Row("42")
	require.NoError(t, err)
	require.Equal(t, "ecc:{orders#3}:42", row)
	require.Equal(t, "ecc:{orders#3}", s3.Record())
	require.Equal(t, "emq:{orders#3}:inval", s3.Inval())
	require.Equal(t, "ecc:{orders#3}:", s3.RowPrefix())
	for _, k := range []string{row, s3.Record(), s3.Inval()} {
		require.Equal(t, keys.Slot("{orders#3}"), keys.Slot(k), k)
		p, err := keys.Parse(k)
		require.NoError(t, err)
		require.Equal(t, "orders", p.Name)
		require.Equal(t, 3, p.Shard)
		require.Equal(t, "orders#3", p.Tag())
	}
	for _, bad := range []int{-1, keys.MaxShards} {
		_, err := tb.Shard(bad)
		require.ErrorIs(t, err, keys.ErrInvalid, "%d", bad)
	}
	_, err = s3.Shard(1)
	require.ErrorIs(t, err, keys.ErrInvalid, "a shard has no shards")
	require.Contains(t, keys.ShardRule, strconv.Itoa(keys.MaxShards-1))

	// No name can spell a shard's tag: the unsharded builders refuse it.
	_, err = keys.NewTable("orders#3")
	require.ErrorIs(t, err, keys.ErrInvalid)
	// A whole-table SCAN pattern (ecc:{orders}:*) cannot match a shard's rows, nor a shard's
	// another shard's.
	require.False(t, strings.HasPrefix(row, tb.RowPrefix()))
	s30, _ := tb.Shard(30)
	require.False(t, strings.HasPrefix(row, s30.RowPrefix()))

	// Rows spread: ShardOf is CRC16 of the id mod n, and 8 shards of a name take 8 slots.
	slots := map[uint16]bool{}
	for i := range 8 {
		sh, err := tb.Shard(i)
		require.NoError(t, err)
		slots[keys.Slot(sh.Record())] = true
	}
	require.Len(t, slots, 8)
	counts := make([]int, 8)
	for i := range 8000 {
		n := keys.ShardOf("user-"+strconv.Itoa(i), 8)
		require.GreaterOrEqual(t, n, 0)
		require.Less(t, n, 8)
		counts[n]++
	}
	for i, c := range counts {
		require.InDelta(t, 1000, c, 200, "shard %d", i)
	}
	require.Equal(t, 0, keys.ShardOf("anything", 1))
	require.Equal(t, int(keys.Slot("123456789"))%5, keys.ShardOf("123456789", 5), "the same CRC16 as the cluster's")
}
