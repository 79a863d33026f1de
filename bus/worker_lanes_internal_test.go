package bus

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRateLimitedDelayBounds: the delay the worker hands to ratelimited is what
// RateLimited(d) would have made of the handler's error, whichever way the error was built:
// capped at MaxRateLimited, negative as 0, and a nil *RateLimitedError (a typed nil returned
// as an error) as 0 instead of a panic in the worker's loop.
func TestRateLimitedDelayBounds(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want time.Duration
	}{
		{RateLimited(time.Second), time.Second},
		{&RateLimitedError{Delay: 48 * time.Hour}, MaxRateLimited},
		{fmt.Errorf("partner: %w", &RateLimitedError{Delay: time.Duration(1<<63 - 1)}), MaxRateLimited},
		{&RateLimitedError{Delay: -time.Second}, 0},
		{error((*RateLimitedError)(nil)), 0},
	} {
		require.True(t, rateLimited(tc.err))
		require.Equal(t, tc.want, rateLimitedDelay(tc.err), "%#v", tc.err)
	}
}
