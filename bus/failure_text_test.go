package bus_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
)

// TestFailureTextNotUTF8: an error text that is not UTF-8 (a binary response body quoted in a
// handler's error) is cut to MaxFailureText bytes like any other, not lost: only a rune that
// would straddle the limit is left out, and bytes that are no rune's cannot straddle it.
func TestFailureTextNotUTF8(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := newBus(t, valkeytest.Shared(t).Client(t), bus.Config{})
	name := freshQueue(t)
	for _, tc := range []struct{ name, text, want string }{
		{"continuation bytes", strings.Repeat("\x80", 2000), strings.Repeat("\x80", bus.MaxFailureText)},
		{"binary after text", "status 500: " + strings.Repeat("\xbf\xfe", 1500), ("status 500: " + strings.Repeat("\xbf\xfe", 1500))[:bus.MaxFailureText]},
		{"a rune across the limit", strings.Repeat("a", bus.MaxFailureText-1) + "é" + "tail", strings.Repeat("a", bus.MaxFailureText-1)},
	} {
		_, err := b.Enqueue(ctx, name, []byte(tc.name), nil)
		require.NoError(t, err)
		jobs, err := b.Claim(ctx, name, nil)
		require.NoError(t, err)
		require.Len(t, jobs, 1)
		_, err = b.Fail(ctx, jobs[0], &bus.FailOpts{Error: tc.text, Backoff: time.Hour})
		require.NoError(t, err)
		info, err := b.Lookup(ctx, name, jobs[0].ID)
		require.NoError(t, err)
		require.Len(t, info.Failures, 1)
		got := info.Failures[0].Error
		require.Equal(t, len(tc.want), len(got), tc.name)
		require.True(t, got == tc.want, "%s: the text is the want's prefix of the error", tc.name)
	}
}
