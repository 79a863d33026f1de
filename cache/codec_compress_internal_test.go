package cache

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCompressInflateBound: a compressed payload inflating to the bound decodes; one byte
// past it is refused with an error naming the bound; a value the codec writes longer than
// the bound is stored plain, so the table never writes a payload its readers refuse.
func TestCompressInflateBound(t *testing.T) {
	const limit = 1000
	unbounded := compressed[string]{inner: JSON[string]{}, above: 1, limit: 1 << 30}
	bounded := compressed[string]{inner: JSON[string]{}, above: 1, limit: limit}
	at := strings.Repeat("a", limit-2) // its JSON is limit bytes
	past := at + "a"

	for _, tc := range []struct {
		value string
		ok    bool
	}{{at, true}, {past, false}} {
		p, err := unbounded.Marshal(tc.value)
		require.NoError(t, err)
		require.Equal(t, byte(payloadDeflate), p[0])
		var got string
		err = bounded.Unmarshal(p, &got)
		if tc.ok {
			require.NoError(t, err)
			require.Equal(t, tc.value, got)
		} else {
			require.ErrorContains(t, err, "bound of 1000 bytes")
			require.Empty(t, got, "nothing was decoded")
		}
	}

	p, err := bounded.Marshal(at)
	require.NoError(t, err)
	require.Equal(t, byte(payloadDeflate), p[0], "at the bound: compressed")
	p, err = bounded.Marshal(past)
	require.NoError(t, err)
	require.Equal(t, byte(payloadPlain), p[0], "past the bound: plain")
	var got string
	require.NoError(t, bounded.Unmarshal(p, &got))
	require.Equal(t, past, got)

	require.Equal(t, MaxInflatedPayload, compressed[string]{inner: JSON[string]{}, above: 1}.bound(), "the default bound")
}
