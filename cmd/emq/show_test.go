package main

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
)

// TestShowFailures shows a dead job's failure history: one entry per failed attempt, in
// --json and as text.
func TestShowFailures(t *testing.T) {
	t.Parallel()
	srv, b, queue := sharedQueue(t)
	ctx := context.Background()
	e, err := b.Enqueue(ctx, queue, []byte("p"), nil)
	require.NoError(t, err)
	require.NoError(t, b.SetMaxAttempts(ctx, queue, 2))
	for _, msg := range []string{"smtp timeout", "bad\naddress"} {
		js, err := b.Claim(ctx, queue, nil)
		require.NoError(t, err)
		require.Len(t, js, 1)
		_, err = b.Fail(ctx, js[0], &bus.FailOpts{Error: msg})
		require.NoError(t, err)
	}

	var j shownJob
	okJSON(t, srv.Addr, &j, "show", queue, e.ID.String())
	require.Equal(t, "dead", j.State)
	require.Len(t, j.Failures, 2)
	require.Equal(t, []int64{1, 2}, []int64{j.Failures[0].Attempt, j.Failures[1].Attempt})
	require.Equal(t, []string{"smtp timeout", "bad\naddress"}, []string{j.Failures[0].Error, j.Failures[1].Error})
	for _, f := range j.Failures {
		require.WithinDuration(t, time.Now(), f.At, time.Minute)
	}
	require.Nil(t, j.Result)

	text := lines(ok(t, srv.Addr, "show", queue, e.ID.String()))
	i := slices.Index(text, "failures:")
	require.GreaterOrEqual(t, i, 0, "text: %q", text)
	require.Equal(t, []string{
		"ATTEMPT AT ERROR",
		"1 " + fmtTime(j.Failures[0].At) + " smtp timeout",
		"2 " + fmtTime(j.Failures[1].At) + ` bad\naddress`,
	}, text[i+1:i+4])
}

// TestShowRetired shows a job completed with a kept result: state retired, its completion
// time and the result decoded; without a result the completed job is not found.
func TestShowRetired(t *testing.T) {
	t.Parallel()
	srv, b, queue := sharedQueue(t)
	ctx := context.Background()

	complete := func(result []byte, ttl time.Duration) string {
		e, err := b.Enqueue(ctx, queue, []byte("p"), nil)
		require.NoError(t, err)
		js, err := b.Claim(ctx, queue, nil)
		require.NoError(t, err)
		require.Len(t, js, 1)
		require.NoError(t, b.Complete(ctx, js[0], &bus.CompleteOpts{Result: result, ResultTTL: ttl}))
		return e.ID.String()
	}
	withJSON := complete([]byte(`{"sent":3}`), time.Hour)
	withBinary := complete([]byte{0xff, 0x00, 0x01}, time.Hour)
	without := complete(nil, 0)

	var j shownJob
	okJSON(t, srv.Addr, &j, "show", queue, withJSON)
	require.Equal(t, "retired", j.State)
	require.Equal(t, int64(1), j.Attempts)
	require.NotNil(t, j.At)
	require.WithinDuration(t, time.Now(), *j.At, time.Minute)
	require.NotNil(t, j.Result)
	require.JSONEq(t, `{"sent":3}`, string(j.Result.JSON))
	require.Equal(t, 10, j.Result.Size)

	text := lines(ok(t, srv.Addr, "show", queue, withJSON))
	require.Contains(t, text, "state: retired")
	require.Contains(t, text, "retired at: "+fmtTime(*j.At))
	require.Contains(t, text, "result: 10 bytes")
	require.Equal(t, []string{"result:", "{", `"sent": 3`, "}"}, text[len(text)-4:])

	okJSON(t, srv.Addr, &j, "show", queue, withBinary)
	require.Equal(t, []byte{0xff, 0x00, 0x01}, j.Result.Base64)
	text = lines(ok(t, srv.Addr, "show", queue, withBinary))
	require.Equal(t, []string{"result (base64):", "/wAB"}, text[len(text)-2:])

	r := emq(t, srv.Addr, "show", queue, without)
	require.Equal(t, exitNotFound, r.code, r.err)
	var raw map[string]any
	out := ok(t, srv.Addr, "show", queue, withJSON, "--json")
	require.NoError(t, json.Unmarshal([]byte(out), &raw))
	require.Contains(t, raw, "result")
	require.NotContains(t, raw, "failures")
}
