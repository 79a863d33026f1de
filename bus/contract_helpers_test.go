package bus_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/lua"
)

// rawScript is one script as a client of another language sees it: the file's bytes, their
// SHA1, and the header. Calls are built from the header alone.
type rawScript struct {
	name   string
	sha    string
	header lua.Header
}

// loadRaw reads lua/<name>.lua, checks that the server's SCRIPT LOAD names it by the SHA1 of
// the file's bytes (on every node) and that the bundle compiled into the library is the same
// file.
func loadRaw(t *testing.T, c valkey.Client, name string) rawScript {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "lua", name+".lua"))
	require.NoError(t, err)
	h, err := lua.ParseHeader(string(src))
	require.NoError(t, err)
	sum := sha1.Sum(src)
	sha := hex.EncodeToString(sum[:])
	require.Equal(t, lua.Get(name).SHA1, sha, "the compiled bundle is the file")
	for _, n := range c.Nodes() {
		got, err := n.Do(context.Background(), n.B().ScriptLoad().Script(string(src)).Build()).ToString()
		require.NoError(t, err)
		require.Equal(t, sha, got)
	}
	return rawScript{name: name, sha: sha, header: h}
}

// call runs the script by EVALSHA on queue. KEYS are the header's grammar forms with <q>
// filled in; ARGV are the header's names looked up in vals, and the starred names once per
// item of items, in header order. Every value given must be named by the header.
func (r rawScript) call(t *testing.T, c valkey.Client, queue string, vals map[string]string, items ...map[string]string) (valkey.ValkeyMessage, error) {
	t.Helper()
	var ks []string
	for _, p := range r.header.Keys {
		ks = append(ks, strings.ReplaceAll(p.Name, "<q>", queue))
	}
	var args, starred []string
	used := map[string]bool{}
	for _, p := range r.header.Args {
		if name, ok := strings.CutSuffix(p.Name, "*"); ok {
			starred = append(starred, name)
			continue
		}
		v, ok := vals[p.Name]
		require.True(t, ok, "%s: the header names ARGV %s; the test gave no value", r.name, p.Name)
		args = append(args, v)
		used[p.Name] = true
	}
	for _, item := range items {
		for _, name := range starred {
			v, ok := item[name]
			require.True(t, ok, "%s: the header names ARGV %s*; the item has no value", r.name, name)
			args = append(args, v)
		}
		require.Len(t, item, len(starred), "%s: an item has values the header does not name", r.name)
	}
	for name := range vals {
		require.True(t, used[name], "%s: ARGV %s is not in the header", r.name, name)
	}
	return c.Do(context.Background(), c.B().Evalsha().Sha1(r.sha).Numkeys(int64(len(ks))).Key(ks...).Arg(args...).Build()).ToMessage()
}

// labels names JOB ids by order of first appearance, so two queues with different ids compare.
type labels map[string]string

func (l labels) of(id string) string {
	if s, ok := l[id]; ok {
		return s
	}
	l[id] = "#" + strconv.Itoa(len(l))
	return l[id]
}

// goErr and rawErr reduce an error to the protocol's code and reason, from each side.
func goErr(err error) string {
	var se *bus.StaleError
	var st *bus.StateError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &se):
		return "EMQSTALE " + string(se.Reason)
	case errors.As(err, &st):
		return "EMQSTATE " + string(st.State)
	case errors.Is(err, bus.ErrPaused):
		return "EMQPAUSED"
	case errors.Is(err, bus.ErrNotFound):
		return "EMQNOJOB"
	}
	return "unexpected: " + err.Error()
}

func rawErr(err error) string {
	if err == nil {
		return "ok"
	}
	f := strings.Fields(err.Error())
	switch f[0] {
	case "EMQSTALE":
		return strings.Join(f[:3], " ")
	case "EMQSTATE":
		return f[0] + " " + f[1]
	}
	return f[0]
}

func one(e bus.Enqueued, err error) ([]bus.Enqueued, error) { return []bus.Enqueued{e}, err }

func first[T any](v T, err error) T { return v }

func setName(t keys.Type) string {
	if t == 0 {
		return ""
	}
	return t.String()
}

// normalized is snapshot with the queue's name and its job ids replaced by labels.
func normalized(t *testing.T, tg valkeytest.Target, name string, l labels) []string {
	t.Helper()
	var out []string
	for k, v := range snapshot(t, tg, name) {
		line := k + " " + v
		for id, label := range l {
			line = strings.ReplaceAll(line, id, label)
		}
		out = append(out, strings.ReplaceAll(line, "{"+name+"}", "{q}"))
	}
	sort.Strings(out)
	return out
}
