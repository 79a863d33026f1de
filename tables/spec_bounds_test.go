package tables_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/tables"
)

// TestResolveTimeoutBound: a LoaderTimeout or L2Timeout so long that the deadlines the cache
// derives from them (a fill's 2*LeaseTTL + LoaderTimeout, a degraded load's L2Timeout +
// LoaderTimeout) overflow a time.Duration is refused, naming the field; 50 years is accepted,
// and keeps those sums positive. Before the fix math.MaxInt64 was accepted, and every fill ran
// under a deadline already past.
func TestResolveTimeoutBound(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		field string
		spec  tables.Spec
	}{
		{"LoaderTimeout", tables.Spec{Name: "t", LoaderTimeout: math.MaxInt64}},
		{"LoaderTimeout", tables.Spec{Name: "t", LoaderTimeout: 100 * 365 * 24 * time.Hour}},
		{"L2Timeout", tables.Spec{Name: "t", L2Timeout: math.MaxInt64}},
	} {
		_, err := tc.spec.Resolve()
		require.ErrorIs(t, err, tables.ErrInvalidSpec, "%+v", tc.spec)
		require.ErrorContains(t, err, tc.field)
	}
	const long = 50 * 365 * 24 * time.Hour
	s, err := tables.Spec{Name: "t", LoaderTimeout: long, L2Timeout: long}.Resolve()
	require.NoError(t, err)
	require.Positive(t, 2*s.LeaseTTL()+s.LoaderTimeout, "a fill's deadline")
	require.Positive(t, s.L2Timeout+s.LoaderTimeout, "a degraded load's deadline")
}
