package echotest_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/echotest"
	"github.com/echocache/echocache/keys"
)

// TestNameUniqueAcrossSubtests: subtests whose names differ only where the name grammar has
// no byte for them (a / against a _, a space, a #) get names of their own, valid by the
// grammar, the same each time a test asks.
func TestNameUniqueAcrossSubtests(t *testing.T) {
	t.Parallel()
	got := map[string]string{}
	for _, sub := range []string{"user/admin", "user_admin", "user#admin", "user admin"} {
		t.Run(sub, func(t *testing.T) {
			name := echotest.Name(t)
			require.NoError(t, keys.ValidateName(name))
			require.Equal(t, name, echotest.Name(t), "the same name each time")
			got[t.Name()] = name
		})
	}
	long := "a_very_long_subtest_name_that_goes_well_past_the_sixty_four_bytes_a_name_may_have"
	for _, sub := range []string{long + "/x", long + "_x"} {
		t.Run(sub, func(t *testing.T) {
			name := echotest.Name(t)
			require.NoError(t, keys.ValidateName(name))
			got[t.Name()] = name
		})
	}
	names := map[string]string{}
	for test, name := range got {
		require.NotContains(t, names, name, "%s and %s get the same name", names[name], test)
		names[name] = test
	}
	require.Len(t, names, 6)
}
