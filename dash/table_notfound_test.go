package dash_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/dash"
	"github.com/echocache/echocache/internal/valkeytest"
)

// TestTablePageUnknown: a table the registry does not hold (a typo) answers 404, as an
// unknown queue does and as emq table exits 3, rather than a page of an empty table.
func TestTablePageUnknown(t *testing.T) {
	t.Parallel()
	s := setup(t, valkeytest.Shared(t).Client(t), dash.Config{})
	code, body := s.get("/tables/" + name(t, ".typo"))
	require.Equal(t, http.StatusNotFound, code, body)
	require.Contains(t, body, "not in the registry")
}
