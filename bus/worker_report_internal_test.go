package bus

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
)

func jsonOf(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

// TestWorkersScriptsKeys: the stats scripts declare exactly the one key the reporter and
// WorkerStats pass, the queue's workers hash; and the snapshot the reporter sends is an object
// the script accepts (it begins with {" and has no at or exp).
func TestWorkersScriptsKeys(t *testing.T) {
	t.Parallel()
	for _, sc := range []*lua.Script{scWorkersReport, scWorkersRead} {
		s, h := sc.Name, sc.Header
		require.Len(t, h.Keys, 1, s)
		k, err := keys.Parse(strings.Replace(h.Keys[0].Name, "<q>", "orders", 1))
		require.NoError(t, err)
		require.Equal(t, keys.Workers, k.Type, s)
		require.Equal(t, keys.MustQueue("orders").Workers(), k.String())
	}
	body, err := jsonOf(&workerSnapshot{V: 1, Kinds: []string{"a"}})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(body, `{"v":1,`), body)
	require.NotContains(t, body, `"at"`)
	require.NotContains(t, body, `"exp"`)
}

// TestReportCtxBound: a report's context has a deadline of its own (reportTimeout), cut to
// Close's hand-back bound once Close's deadline passed, and no report is sent past that bound:
// valkey-go reads a dialed connection's handshake by the deadline and ignores a cancel, so the
// bound must be a deadline.
func TestReportCtxBound(t *testing.T) {
	t.Parallel()
	w := &Worker{}
	w.hardCtx, w.hardCancel = context.WithCancel(context.Background())
	defer w.hardCancel()

	ctx, cancel, ok := w.reportCtx()
	require.True(t, ok)
	d, has := ctx.Deadline()
	require.True(t, has)
	require.WithinDuration(t, time.Now().Add(reportTimeout), d, 100*time.Millisecond)
	cancel()

	hard := time.Now().Add(300 * time.Millisecond)
	w.hardAt.Store(hard.UnixNano())
	ctx, cancel, ok = w.reportCtx()
	require.True(t, ok)
	d, _ = ctx.Deadline()
	require.False(t, d.After(hard), "cut to the hand-back bound")
	cancel()

	w.hardAt.Store(time.Now().Add(-time.Millisecond).UnixNano())
	_, _, ok = w.reportCtx()
	require.False(t, ok, "past the bound nothing is sent")
}
