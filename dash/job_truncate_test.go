package dash_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/dash"
	"github.com/echocache/echocache/internal/valkeytest"
)

// heading is the <h2> of body that starts with title, up to its end.
func heading(t *testing.T, body, title string) string {
	t.Helper()
	i := strings.Index(body, "<h2>"+title)
	require.GreaterOrEqual(t, i, 0, "a heading %s", title)
	j := strings.Index(body[i:], "</h2>")
	require.Positive(t, j)
	return body[i : i+j]
}

// TestJobPageTruncated: a payload longer than the page shows is marked as cut, and UTF-8
// text cut in the middle of a character is still shown as text, not as a hex dump.
func TestJobPageTruncated(t *testing.T) {
	t.Parallel()
	s := setup(t, valkeytest.Shared(t).Client(t), dash.Config{})
	q := name(t, "")
	// 3-byte characters: 64 KiB is not a multiple of 3, the cut falls inside one.
	text := strings.Repeat("€", 30_000)
	e, err := s.bus.Enqueue(context.Background(), q, []byte(text), nil)
	require.NoError(t, err)
	code, body := s.get("/queues/" + q + "/jobs/" + e.ID.String())
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, heading(t, body, "Payload"), "90000 bytes, text, first 64 KiB")
	require.Contains(t, body, strings.Repeat("€", 100))
}
