package bus

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// TestParseLost: the lost list of an extend reply names jobs of the call with an EMQSTALE
// reason; anything else is ErrProtocol, never a panic.
func TestParseLost(t *testing.T) {
	t.Parallel()
	a := Job{Queue: "q", ID: keys.NewJobID(), Token: 3}
	b := Job{Queue: "q", ID: keys.NewJobID(), Token: 1}
	jobs := []Job{a, b}

	lost, err := parseLost("q", jobs, nil)
	require.NoError(t, err)
	require.Empty(t, lost)
	lost, err = parseLost("q", jobs, []string{b.ID.String(), "EMQSTALE token mismatch"})
	require.NoError(t, err)
	require.Equal(t, []*StaleError{{Op: "extend", Queue: "q", ID: b.ID, Token: 1, Reason: TokenMismatch}}, lost)

	for _, tc := range []struct {
		name string
		flat []string
	}{
		{"odd", []string{a.ID.String()}},
		{"no prefix", []string{a.ID.String(), "token mismatch"}},
		{"shorter than the prefix", []string{a.ID.String(), "EMQ"}},
		{"empty reason", []string{a.ID.String(), ""}},
		{"not a job of the call", []string{keys.NewJobID().String(), "EMQSTALE no row"}},
		{"not an id", []string{"x", "EMQSTALE no row"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseLost("q", jobs, tc.flat)
			require.ErrorIs(t, err, ErrProtocol)
		})
	}
}

func TestParseJobIDs(t *testing.T) {
	t.Parallel()
	id := keys.NewJobID()
	ids, err := parseJobIDs("promote", []string{id.String()})
	require.NoError(t, err)
	require.Equal(t, []keys.JobID{id}, ids)
	ids, err = parseJobIDs("promote", nil)
	require.NoError(t, err)
	require.Empty(t, ids)
	for _, bad := range []string{"", "x", "JOB_", strings.ToLower(id.String()), id.String() + "0"} {
		_, err := parseJobIDs("promote", []string{id.String(), bad})
		require.ErrorIs(t, err, ErrProtocol, "%q", bad)
	}
}

// scriptReply is the message the server answers for a script that returns src: a way to build
// replies of any shape, valkey-go having no constructor for them.
func scriptReply(t *testing.T, c valkey.Client, src string) valkey.ValkeyMessage {
	t.Helper()
	msg, err := c.Do(context.Background(), c.B().Eval().Script(src).Numkeys(0).Build()).ToMessage()
	require.NoError(t, err, src)
	return msg
}

// TestReplyDecoders: the decoders the Bus verbs and the worker share answer ErrProtocol for a
// reply of the wrong shape, and read a right one.
func TestReplyDecoders(t *testing.T) {
	t.Parallel()
	c := valkeytest.Shared(t).Client(t)
	j := Job{Queue: "q", ID: keys.NewJobID(), Token: 2}
	id := j.ID.String()

	t.Run("extend", func(t *testing.T) {
		t.Parallel()
		deadline, lost, err := extendReply("q", []Job{j}, scriptReply(t, c, "return {1700000000000, {'"+id+"', 'EMQSTALE not active'}}"))
		require.NoError(t, err)
		require.Equal(t, time.UnixMilli(1700000000000), deadline)
		require.Equal(t, []*StaleError{{Op: "extend", Queue: "q", ID: j.ID, Token: 2, Reason: NotActive}}, lost)
		for _, src := range []string{
			"return 'OK'",
			"return {}",
			"return {1}",
			"return {1, {}, {}}",
			"return {'soon', {}}",
			"return {1, 'lost'}",
			"return {1, {'" + id + "'}}",
			"return {1, {'" + id + "', 'EMQ'}}",
			"return {1, {'" + keys.NewJobID().String() + "', 'EMQSTALE no row'}}",
			"return {1, {{'" + id + "'}, 'EMQSTALE no row'}}",
		} {
			_, _, err := extendReply("q", []Job{j}, scriptReply(t, c, src))
			require.ErrorIs(t, err, ErrProtocol, src)
		}
	})
	t.Run("reap", func(t *testing.T) {
		t.Parallel()
		r, err := reapReply(scriptReply(t, c, "return {{'"+id+"'}, {}}"))
		require.NoError(t, err)
		require.Equal(t, Reaped{Requeued: []keys.JobID{j.ID}, Dead: []keys.JobID{}}, r)
		for _, src := range []string{
			"return 'OK'",
			"return {}",
			"return {{}}",
			"return {{}, {}, {}}",
			"return {'" + id + "', {}}",
			"return {{}, {'x'}}",
			"return {{{'" + id + "'}}, {}}",
		} {
			_, err := reapReply(scriptReply(t, c, src))
			require.ErrorIs(t, err, ErrProtocol, src)
		}
	})
	t.Run("job ids", func(t *testing.T) {
		t.Parallel()
		ids, err := jobIDs("promote", scriptReply(t, c, "return {'"+id+"'}"))
		require.NoError(t, err)
		require.Equal(t, []keys.JobID{j.ID}, ids)
		for _, src := range []string{"return 'OK'", "return 7", "return {'x'}", "return {{'" + id + "'}}"} {
			_, err := jobIDs("promote", scriptReply(t, c, src))
			require.ErrorIs(t, err, ErrProtocol, src)
		}
	})
}

// lockedBuffer is a log sink safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestWorkerMalformedReplies: the worker's heartbeat and housekeeping log a reply they cannot
// read as ErrProtocol and go on; nothing panics on the loop's goroutine and no lease is
// taken for lost.
func TestWorkerMalformedReplies(t *testing.T) {
	t.Parallel()
	c := valkeytest.Shared(t).Client(t)
	b, err := New(c, Config{})
	require.NoError(t, err)
	var log lockedBuffer
	w, err := NewWorker(b, WorkerConfig{Queue: "malformed", Logger: slog.New(slog.NewTextHandler(&log, nil))})
	require.NoError(t, err)
	l := newLoop(w)
	defer l.stopTimers()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	r := &inflight{job: Job{Queue: "malformed", ID: keys.NewJobID(), Token: 1}, lease: time.Second, since: time.Now(), ctx: ctx, cancel: cancel}
	l.held[r] = struct{}{}
	id := r.job.ID.String()

	for _, src := range []string{"return 'OK'", "return {1, {'" + id + "'}}", "return {1, {'" + id + "', 'EMQ'}}"} {
		steps := l.extendSteps()
		require.Len(t, steps, 1)
		require.True(t, steps[0].reply(result{msg: scriptReply(t, c, src)}), src)
		require.False(t, r.lost, src)
		require.NoError(t, context.Cause(r.ctx), src)
	}
	for _, src := range []string{"return 'OK'", "return {{'x'}, {}}", "return {'x'}"} {
		for _, s := range l.housekeepSteps() {
			require.True(t, s.reply(result{msg: scriptReply(t, c, src)}), src)
		}
	}
	require.Equal(t, 3+2*3, strings.Count(log.String(), ErrProtocol.Error()), log.String())
	require.Zero(t, w.Stats().LeaseLost)
}
