package dash

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBackRefusesControlBytes: a form's back is followed only when it is a path of this
// dashboard. Browsers drop tabs and newlines from a Location, so "/\t/evil.example" on a
// dashboard mounted at the root would turn into "//evil.example", another site: any control
// byte makes back the queue's page instead.
func TestBackRefusesControlBytes(t *testing.T) {
	for _, prefix := range []string{"", "/ops"} {
		d := &Dashboard{cfg: Config{Prefix: prefix}}
		queuePage := prefix + "/queues/q"
		bad := []string{prefix + "/\t/evil.example", prefix + "/\n/evil.example", prefix + "/\x00/evil.example",
			prefix + "/\x7f/x", prefix + "/\\evil.example", "https://evil.example/", "//evil.example"}
		for _, back := range bad {
			r := &http.Request{PostForm: url.Values{"back": {back}}}
			require.Equal(t, queuePage, d.backOf(r, "q"), "prefix %q, back %q", prefix, back)
		}
		ok := prefix + "/queues/q/jobs/JOB_01?x=1"
		require.Equal(t, ok, d.backOf(&http.Request{PostForm: url.Values{"back": {ok}}}, "q"))
	}
}
