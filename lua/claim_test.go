package lua_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
)

func TestMain(m *testing.M) { valkeytest.Main(m) }

// serverMillis reads the server's clock as the claim script does.
func serverMillis(t *testing.T, c valkey.Client) int64 {
	t.Helper()
	tm, err := c.Do(context.Background(), c.B().Time().Build()).AsStrSlice()
	require.NoError(t, err)
	sec, _ := strconv.ParseInt(tm[0], 10, 64)
	usec, _ := strconv.ParseInt(tm[1], 10, 64)
	return sec*1000 + usec/1000
}

// claimKeys is the claim's KEYS: pending, active, schedule, meta.
func claimKeys(q keys.Queue) []string {
	return []string{q.Pending(), q.Active(), q.Schedule(), q.Meta()}
}

// TestClaimSeed runs the seed's claim over a three-job queue: it pops the lex-oldest id, mints
// attempts 1, marks the row active and leases it at the server's TIME plus 40 ms.
func TestClaimSeed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := valkeytest.Shared(t).Client(t)
	q := keys.MustQueue("claim-seed")
	ids := []keys.JobID{keys.NewJobID(), keys.NewJobID(), keys.NewJobID()}
	for i, id := range ids {
		row, err := q.Job(id)
		require.NoError(t, err)
		require.NoError(t, c.Do(ctx, c.B().Hset().Key(row).FieldValue().
			FieldValue("state", "pending").FieldValue("attempts", "0").FieldValue("payload", "p"+strconv.Itoa(i)).Build()).Error())
	}
	// Add them out of order: the set's lex order, not insertion order, decides.
	for _, i := range []int{2, 0, 1} {
		require.NoError(t, c.Do(ctx, c.B().Zadd().Key(q.Pending()).ScoreMember().ScoreMember(0, ids[i].String()).Build()).Error())
	}

	claim := lua.Get("claim")
	before := serverMillis(t, c)
	reply, err := claim.Exec(ctx, c, claimKeys(q), []string{"40", "1", "0"}).ToArray()
	after := serverMillis(t, c)
	require.NoError(t, err)
	require.Len(t, reply, 3)
	id, _ := reply[0].ToString()
	payload, _ := reply[1].ToString()
	att, _ := reply[2].AsInt64()
	require.Equal(t, ids[0].String(), id, "pops the lex-oldest id")
	require.Equal(t, "p0", payload)
	require.Equal(t, int64(1), att, "the first claim mints token 1")

	row, _ := q.Job(ids[0])
	fields, err := c.Do(ctx, c.B().Hgetall().Key(row).Build()).AsStrMap()
	require.NoError(t, err)
	require.Equal(t, map[string]string{"state": "active", "attempts": "1", "payload": "p0"}, fields)

	score, err := c.Do(ctx, c.B().Zscore().Key(q.Active()).Member(id).Build()).AsFloat64()
	require.NoError(t, err)
	require.GreaterOrEqual(t, int64(score), before+40, "lease = server TIME + 40 ms")
	require.LessOrEqual(t, int64(score), after+40)

	n, err := c.Do(ctx, c.B().Zcard().Key(q.Pending()).Build()).AsInt64()
	require.NoError(t, err)
	require.Equal(t, int64(2), n)
}

func TestClaimEmpty(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := valkeytest.Shared(t).Client(t)
	q := keys.MustQueue("claim-empty")
	reply, err := lua.Get("claim").Exec(ctx, c, claimKeys(q), []string{"40", "1", "0"}).ToArray()
	require.NoError(t, err)
	require.Empty(t, reply)
	n, err := c.Do(ctx, c.B().Exists().Key(q.Active()).Build()).AsInt64()
	require.NoError(t, err)
	require.Zero(t, n, "an empty claim writes nothing")
}

func TestClaimRefusesForeignKeys(t *testing.T) {
	t.Parallel()
	c := valkeytest.Shared(t).Client(t)
	err := lua.Get("claim").Exec(context.Background(), c, []string{"{x}pending", "{x}active", "{x}schedule", "{x}meta"}, []string{"40", "1", "0"}).Error()
	require.ErrorContains(t, err, "EMQKEYS")
}
