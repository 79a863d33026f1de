package main

import (
	"context"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
)

// TestShowJSONInvalidUTF8: args that parse as JSON but hold bytes that are not UTF-8 (which
// encoding/json's validator lets through) are shown in base64, so --json prints valid JSON
// (UTF-8, RFC 8259) and the bytes survive.
func TestShowJSONInvalidUTF8(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Shared(t)
	b, err := bus.New(srv.Client(t), bus.Config{})
	require.NoError(t, err)
	queue := valkeytest.TestName(t)
	args := []byte("{\"name\":\"caf\xe9\"}") // Latin-1, not UTF-8
	payload, err := bus.Envelope("legacy", args)
	require.NoError(t, err)
	e, err := b.Enqueue(context.Background(), queue, payload, nil)
	require.NoError(t, err)

	out := ok(t, srv.Addr, "show", queue, e.ID.String(), "--json")
	require.True(t, utf8.ValidString(out), "--json printed bytes that are not UTF-8: %q", out)
	var j shownJob
	require.NoError(t, json.Unmarshal([]byte(out), &j))
	require.Equal(t, "legacy", j.Kind)
	require.Equal(t, args, j.Base64, "the args' bytes, as they are")
}
