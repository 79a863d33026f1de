package main

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
)

// TestShowEscapesControlBytes: a payload's text and a failure's error may hold terminal
// control sequences (an ESC that recolours or clears the operator's screen); the text output
// shows them escaped, keeping the text's own line breaks, and --json keeps them as they are.
func TestShowEscapesControlBytes(t *testing.T) {
	t.Parallel()
	srv, b, queue := sharedQueue(t)
	ctx := context.Background()
	e, err := b.Enqueue(ctx, queue, []byte("line one\n\x1b[2Jcleared\x07"), nil)
	require.NoError(t, err)
	js, err := b.Claim(ctx, queue, nil)
	require.NoError(t, err)
	require.Len(t, js, 1)
	_, err = b.Fail(ctx, js[0], &bus.FailOpts{Error: "red \x1b[31malert"})
	require.NoError(t, err)

	out := ok(t, srv.Addr, "show", queue, e.ID.String())
	require.NotContains(t, out, "\x1b", "no raw ESC reaches the terminal")
	require.NotContains(t, out, "\x07")
	require.Contains(t, out, `\x1b[2Jcleared\x07`)
	require.Contains(t, out, "line one\n", "the text's own line breaks stay")
	require.Contains(t, out, `red \x1b[31malert`)

	var j shownJob
	okJSON(t, srv.Addr, &j, "show", queue, e.ID.String())
	require.Equal(t, "red \x1b[31malert", j.Failures[0].Error, "--json keeps the bytes")
	require.True(t, strings.HasPrefix(j.Failures[0].Error, "red"))
}

// TestShowEscapesControlsInJSON: JSON escapes the C0 controls but may hold DEL and the C1
// controls raw, and U+009B is a terminal's CSI: show's text output escapes them in a JSON
// payload too, as it does in text.
func TestShowEscapesControlsInJSON(t *testing.T) {
	t.Parallel()
	srv, b, queue := sharedQueue(t)
	e, err := b.Enqueue(context.Background(), queue, []byte("[\"\u009b2J\x7f\"]"), nil)
	require.NoError(t, err)
	out := ok(t, srv.Addr, "show", queue, e.ID.String())
	require.NotContains(t, out, "\u009b", "no raw CSI reaches the terminal")
	require.NotContains(t, out, "\x7f")
	require.Contains(t, out, `"\u009b2J\x7f"`)
}
