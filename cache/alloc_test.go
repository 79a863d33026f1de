package cache_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/tables"
)

// TestL1HitAllocatesNothing: an L1 hit through Table.Get allocates nothing, for string and
// integer ids, for values and for remembered not-founds. (testing.AllocsPerRun refuses to
// run in a parallel test, so this one is sequential; it takes milliseconds.)
func TestL1HitAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	c := newCache(t, targets[0].client(t))
	spec := tables.Spec{TTL: time.Hour, L1TTL: time.Hour}

	spec.Name = tableName(t) + "s"
	strs := newTable(t, c, spec, &source{gone: map[string]bool{"ghost": true}})
	spec.Name = tableName(t) + "i"
	ints, err := cache.NewTable(c, spec, func(_ context.Context, id int64) (user, error) {
		return user{ID: "int", Name: "n"}, nil
	}, nil)
	require.NoError(t, err)

	_, err = strs.Get(ctx, "user-42")
	require.NoError(t, err)
	_, err = strs.Get(ctx, "ghost")
	require.ErrorIs(t, err, cache.ErrNotFound)
	_, err = ints.Get(ctx, 42)
	require.NoError(t, err)

	for _, tc := range []struct {
		name string
		get  func()
	}{
		{"string id", func() { _, _ = strs.Get(ctx, "user-42") }},
		{"not found", func() { _, _ = strs.Get(ctx, "ghost") }},
		{"int64 id", func() { _, _ = ints.Get(ctx, 42) }},
	} {
		before := strs.Stats().L1Hits + ints.Stats().L1Hits
		allocs := testing.AllocsPerRun(1000, tc.get)
		require.Zero(t, allocs, tc.name)
		require.Equal(t, before+1001, strs.Stats().L1Hits+ints.Stats().L1Hits, "%s: every call was an L1 hit", tc.name)
	}
}

// TestL2ReadUnderCallerDeadline: an L2 read whose caller's deadline comes before the table's
// L2Timeout runs under the caller's context, with no context or timer of its own: it
// allocates fewer objects than the same read without a deadline (a context with a deadline
// and its timer are five).
func TestL2ReadUnderCallerDeadline(t *testing.T) {
	c := newCache(t, valkeytest.Shared(t).Client(t))
	spec := tables.Spec{Name: tableName(t), L1TTL: tables.Off, EarlyRefreshBeta: tables.Off, L2Timeout: relaxedL2}
	tbl := newTable(t, c, spec, &source{})
	_, err := tbl.Get(context.Background(), "k") // the fill writes the row
	require.NoError(t, err)
	short, cancel := context.WithTimeout(context.Background(), relaxedL2/2)
	defer cancel()
	read := func(ctx context.Context) func() {
		return func() {
			if _, err := tbl.Get(ctx, "k"); err != nil {
				t.Fatal(err)
			}
		}
	}
	before := tbl.Stats().L2Hits
	bare := testing.AllocsPerRun(100, read(context.Background()))
	bounded := testing.AllocsPerRun(100, read(short))
	require.Equal(t, before+202, tbl.Stats().L2Hits, "every read was an L2 hit")
	t.Logf("allocations per L2 read: %.0f without a deadline, %.0f under the caller's", bare, bounded)
	require.LessOrEqual(t, bounded, bare-3)
}

// TestGetManyAllocations: GetMany of 100 ids whose rows are in L2 (L1 off) allocates, per
// row, what the codec's decode allocates plus one (the reply string valkey-go reads), and a
// bounded number per call besides; nothing of ours per row, whichever the codec.
func TestGetManyAllocations(t *testing.T) {
	ctx := context.Background()
	c := newCache(t, valkeytest.Shared(t).Client(t))
	const rows = 100
	ids := make([]int64, rows)
	for i := range ids {
		ids[i] = int64(i + 1)
	}
	for _, tc := range []struct {
		name  string
		codec cache.Codec[user]
	}{{"json", cache.JSON[user]{}}, {"msgpack", cache.Msgpack[user]{}}} {
		spec := tables.Spec{Name: tableName(t), L1TTL: tables.Off, EarlyRefreshBeta: tables.Off, L2Timeout: relaxedL2}
		tbl, err := cache.NewTable(c, spec, func(_ context.Context, id int64) (user, error) {
			return user{ID: strconv.FormatInt(id, 10), Name: "name-" + strconv.FormatInt(id, 10)}, nil
		}, &cache.TableOpts[int64, user]{Codec: tc.codec})
		require.NoError(t, err)
		got, err := tbl.GetMany(ctx, ids) // fills every row
		require.NoError(t, err)
		require.Len(t, got, rows)

		payload, err := tc.codec.Marshal(user{ID: "42", Name: "name-42"})
		require.NoError(t, err)
		dec := tc.codec.(interface {
			UnmarshalString(string, *user) error
		})
		s := string(payload)
		codecAllocs := testing.AllocsPerRun(200, func() {
			var u user
			_ = dec.UnmarshalString(s, &u)
		})
		before := tbl.Stats().L2Hits
		allocs := testing.AllocsPerRun(50, func() {
			m, err := tbl.GetMany(ctx, ids)
			if err != nil || len(m) != rows {
				t.Fatalf("GetMany: %d rows, %v", len(m), err)
			}
		})
		require.Equal(t, before+51*rows, tbl.Stats().L2Hits, "every row was an L2 hit")
		t.Logf("%s: %.0f allocations per GetMany of %d (%.2f per row); the codec's decode: %.0f per row",
			tc.name, allocs, rows, allocs/rows, codecAllocs)
		// Per row: the codec's allocations and valkey-go's reply string; per call: the
		// maps, slices, the key buffer, the pipeline (under 40 in all).
		require.LessOrEqual(t, allocs, rows*(codecAllocs+1)+40, tc.name)
	}
}
