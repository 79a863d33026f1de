package tables_test

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/tables"
)

func TestResolveDefaults(t *testing.T) {
	t.Parallel()
	s, err := tables.Spec{Name: "users"}.Resolve()
	require.NoError(t, err)
	require.Equal(t, tables.Spec{
		Name:             "users",
		TTL:              tables.DefaultTTL,
		Jitter:           tables.DefaultJitter,
		L1TTL:            tables.DefaultL1TTL,
		NegativeTTL:      tables.DefaultNegativeTTL,
		L1MaxEntries:     tables.DefaultL1MaxEntries,
		LoaderTimeout:    tables.DefaultLoaderTimeout,
		EarlyRefreshBeta: tables.DefaultEarlyRefreshBeta,
		StaleTimeout:     tables.DefaultStaleTimeout,
		L2Timeout:        tables.DefaultL2Timeout,
		DegradedLoads:    tables.DefaultDegradedLoads,
		DegradedL1TTL:    tables.DefaultDegradedL1TTL,

		MaxPendingInvalidations: tables.DefaultMaxPendingInvalidations,
		Shards:                  tables.DefaultShards,
	}, s)
	require.True(t, s.DegradedEnabled(), "degraded mode is on by default")
	require.False(t, s.StaleEnabled(), "stale-on-error is opt-in")
	require.True(t, s.L1Enabled())
	require.True(t, s.NegativeEnabled())
	require.True(t, s.EarlyRefreshEnabled())
	require.Equal(t, tables.DefaultLoaderTimeout+tables.LeaseGrace, s.LeaseTTL())

	again, err := s.Resolve()
	require.NoError(t, err)
	require.Equal(t, s, again, "resolving a resolved spec changes nothing")
}

func TestResolveOff(t *testing.T) {
	t.Parallel()
	s, err := tables.Spec{Name: "t", Jitter: tables.Off, L1TTL: tables.Off, NegativeTTL: tables.Off, EarlyRefreshBeta: tables.Off}.Resolve()
	require.NoError(t, err)
	require.Equal(t, float64(tables.Off), s.Jitter, "Off jitter writes every row with exactly TTL")
	again, err := s.Resolve()
	require.NoError(t, err)
	require.Equal(t, s, again, "a resolved Spec resolves to itself: Off stays off")
	require.False(t, s.L1Enabled())
	require.False(t, s.NegativeEnabled())
	require.False(t, s.EarlyRefreshEnabled())
	off, err := tables.Spec{Name: "t", DegradedLoads: tables.Off, DegradedL1TTL: tables.Off}.Resolve()
	require.NoError(t, err)
	require.False(t, off.DegradedEnabled())
	again, err = s.Resolve()
	require.NoError(t, err)
	require.Equal(t, s.L1Enabled(), again.L1Enabled())
	require.Equal(t, s.NegativeEnabled(), again.NegativeEnabled())
}

func TestResolveKeepsExplicitValues(t *testing.T) {
	t.Parallel()
	in := tables.Spec{Name: "t", TTL: 300 * time.Millisecond, Jitter: 0.25, L1TTL: time.Second, NegativeTTL: 5 * time.Millisecond,
		L1MaxEntries: 7, LoaderTimeout: 2 * time.Millisecond, EarlyRefreshBeta: 2.5,
		StaleOnError: 3 * time.Second, StaleTimeout: 20 * time.Millisecond, L2Timeout: 40 * time.Millisecond,
		DegradedLoads: 2, DegradedL1TTL: 300 * time.Millisecond, MaxPendingInvalidations: 5, Shards: 8}
	s, err := in.Resolve()
	require.NoError(t, err)
	require.Equal(t, in, s)
}

func TestResolveRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		spec  tables.Spec
		field string
	}{
		{"empty name", tables.Spec{}, "Name"},
		{"brace in name", tables.Spec{Name: "a{b"}, "Name"},
		{"colon in name", tables.Spec{Name: "a:b"}, "Name"},
		{"long name", tables.Spec{Name: strings.Repeat("n", keys.MaxNameLen+1)}, "Name"},
		{"negative TTL", tables.Spec{Name: "t", TTL: -time.Second}, "TTL"},
		{"sub-ms TTL", tables.Spec{Name: "t", TTL: time.Microsecond}, "TTL"},
		{"jitter 1", tables.Spec{Name: "t", Jitter: 1}, "Jitter"},
		{"negative jitter", tables.Spec{Name: "t", Jitter: -0.5}, "Jitter"},
		{"NaN jitter", tables.Spec{Name: "t", Jitter: math.NaN()}, "Jitter"},
		{"negative L1TTL", tables.Spec{Name: "t", L1TTL: -time.Second}, "L1TTL"},
		{"sub-ms NegativeTTL", tables.Spec{Name: "t", NegativeTTL: time.Microsecond}, "NegativeTTL"},
		{"negative L1MaxEntries", tables.Spec{Name: "t", L1MaxEntries: -1}, "L1MaxEntries"},
		{"sub-ms LoaderTimeout", tables.Spec{Name: "t", LoaderTimeout: time.Nanosecond}, "LoaderTimeout"},
		{"negative beta", tables.Spec{Name: "t", EarlyRefreshBeta: -2}, "EarlyRefreshBeta"},
		{"infinite beta", tables.Spec{Name: "t", EarlyRefreshBeta: math.Inf(1)}, "EarlyRefreshBeta"},
		{"negative StaleOnError", tables.Spec{Name: "t", StaleOnError: -time.Second}, "StaleOnError"},
		{"sub-ms L2Timeout", tables.Spec{Name: "t", L2Timeout: time.Microsecond}, "L2Timeout"},
		{"negative L2Timeout", tables.Spec{Name: "t", L2Timeout: -time.Second}, "L2Timeout"},
		{"negative DegradedLoads", tables.Spec{Name: "t", DegradedLoads: -2}, "DegradedLoads"},
		{"sub-ms DegradedL1TTL", tables.Spec{Name: "t", DegradedL1TTL: time.Microsecond}, "DegradedL1TTL"},
		{"negative MaxPendingInvalidations", tables.Spec{Name: "t", MaxPendingInvalidations: -1}, "MaxPendingInvalidations"},
		{"negative Shards", tables.Spec{Name: "t", Shards: -1}, "Shards"},
		{"too many Shards", tables.Spec{Name: "t", Shards: keys.MaxShards + 1}, "Shards"},
		{"sub-ms StaleTimeout", tables.Spec{Name: "t", StaleOnError: time.Second, StaleTimeout: time.Microsecond}, "StaleTimeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := tc.spec.Resolve()
			require.ErrorIs(t, err, tables.ErrInvalidSpec)
			require.ErrorContains(t, err, tc.field)
		})
	}
}

// TestResolveL1MaxEntriesBound: L1MaxEntries is refused past the bound at which L1's counter
// sizing (L1CountersPerEntry per entry, rounded up to a power of two by ristretto) would
// overflow an int64; the error names the field and the bound.
func TestResolveL1MaxEntriesBound(t *testing.T) {
	t.Parallel()
	counters := int64(tables.L1CountersPerEntry) * tables.MaxL1MaxEntries
	require.Positive(t, counters)
	require.LessOrEqual(t, counters, int64(1)<<62, "the rounded-up power of two fits an int64")

	s, err := tables.Spec{Name: "t", L1MaxEntries: tables.MaxL1MaxEntries}.Resolve()
	require.NoError(t, err)
	require.Equal(t, int64(tables.MaxL1MaxEntries), s.L1MaxEntries)
	for _, n := range []int64{tables.MaxL1MaxEntries + 1, 1 << 59, math.MaxInt64 / 10, math.MaxInt64} {
		_, err := tables.Spec{Name: "t", L1MaxEntries: n}.Resolve()
		require.ErrorIs(t, err, tables.ErrInvalidSpec, "%d", n)
		require.ErrorContains(t, err, "L1MaxEntries")
		require.ErrorContains(t, err, fmt.Sprint(int64(tables.MaxL1MaxEntries)))
	}
}

func TestRegistry(t *testing.T) {
	t.Parallel()
	var r tables.Registry
	users, err := r.Declare(tables.Spec{Name: "users"})
	require.NoError(t, err)
	require.Equal(t, tables.DefaultTTL, users.Spec.TTL)
	row, err := users.Keys.Row("42")
	require.NoError(t, err)
	require.Equal(t, "ecc:{users}:42", row)

	_, err = r.Declare(tables.Spec{Name: "users", TTL: time.Hour})
	require.ErrorIs(t, err, tables.ErrDuplicate)
	_, err = r.Declare(tables.Spec{Name: "a}b"})
	require.ErrorIs(t, err, tables.ErrInvalidSpec)
	require.ErrorIs(t, err, keys.ErrInvalid)

	_, err = r.Declare(tables.Spec{Name: "orders"})
	require.NoError(t, err)
	got, ok := r.Lookup("users")
	require.True(t, ok)
	require.Equal(t, users, got)
	_, ok = r.Lookup("nope")
	require.False(t, ok)
	all := r.All()
	require.Len(t, all, 2)
	require.Equal(t, "orders", all[0].Spec.Name)
	require.Equal(t, "users", all[1].Spec.Name)

	r.Forget("users")
	_, err = r.Declare(tables.Spec{Name: "users"})
	require.NoError(t, err, "a forgotten name may be declared again")

	var other tables.Registry
	_, err = other.Declare(tables.Spec{Name: "users"})
	require.NoError(t, err, "registries are independent: no package-level state")
}

// TestRegistryShards: a table of one shard keeps the unsharded layout; a table of N has N
// shard builders, and KeysFor places each id in the shard keys.ShardOf names.
func TestRegistryShards(t *testing.T) {
	t.Parallel()
	var r tables.Registry
	one, err := r.Declare(tables.Spec{Name: "one"})
	require.NoError(t, err)
	require.Equal(t, []keys.Table{one.Keys}, one.Shards)
	require.Equal(t, "ecc:{one}", one.KeysFor("42").Record())
	eight, err := r.Declare(tables.Spec{Name: "eight", Shards: 8})
	require.NoError(t, err)
	require.Len(t, eight.Shards, 8)
	for i, sh := range eight.Shards {
		require.Equal(t, fmt.Sprintf("ecc:{eight#%d}", i), sh.Record())
	}
	for _, id := range []string{"1", "42", "user-7", "é"} {
		i := keys.ShardOf(id, 8)
		require.Equal(t, i, eight.ShardIndex(id))
		row, err := eight.KeysFor(id).Row(id)
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("ecc:{eight#%d}:%s", i, id), row)
	}
	max, err := r.Declare(tables.Spec{Name: "max", Shards: keys.MaxShards})
	require.NoError(t, err)
	require.Len(t, max.Shards, keys.MaxShards)
}

// TestRegistryConcurrentDeclare: of many goroutines declaring one name, exactly one wins.
func TestRegistryConcurrentDeclare(t *testing.T) {
	t.Parallel()
	var r tables.Registry
	const n = 64
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { _, errs[i] = r.Declare(tables.Spec{Name: "hot", TTL: time.Duration(i+1) * time.Second}) })
	}
	wg.Wait()
	wins := 0
	for _, err := range errs {
		if err == nil {
			wins++
		} else {
			require.ErrorIs(t, err, tables.ErrDuplicate)
		}
	}
	require.Equal(t, 1, wins)
}

func ExampleRegistry_Declare() {
	var reg tables.Registry
	users, err := reg.Declare(tables.Spec{Name: "users", TTL: 10 * time.Minute, NegativeTTL: tables.Off})
	if err != nil {
		panic(err)
	}
	row, _ := users.Keys.Row("42")
	fmt.Println(row, users.Spec.TTL, users.Spec.Jitter, users.Spec.LeaseTTL())
	_, err = reg.Declare(tables.Spec{Name: "users"})
	fmt.Println(err)
	// Output:
	// ecc:{users}:42 10m0s 0.1 5.5s
	// tables: duplicate table name: "users" is already declared on this cache
}
