package keys_test

import (
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
	// The builders that take an argument too: they returned the bare argument, a key outside
	// the grammar, from a zero builder.
	require.Panics(t, func() { _, _ = keys.Table{}.Row("42") })
	require.Panics(t, func() { _, _ = keys.Queue{}.Unique("k") })
	require.Panics(t, func() { _, _ = keys.Queue{}.Periodic("p") })
	require.Panics(t, func() { _, _ = keys.Queue{}.LanePending("a") })
	require.Panics(t, func() { _, _ = keys.Queue{}.LaneLog("a") })
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
