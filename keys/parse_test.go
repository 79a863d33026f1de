package keys_test

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/keys"
)

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
