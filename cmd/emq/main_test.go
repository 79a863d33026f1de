package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
)

// emqBin is the emq binary the tests run, built once by TestMain.
var emqBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "emq-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "emq tests:", err)
		os.Exit(1)
	}
	emqBin = filepath.Join(dir, "emq")
	if out, err := exec.Command("go", "build", "-o", emqBin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "emq tests: building emq: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	defer os.RemoveAll(dir)
	valkeytest.Main(m)
}

// result is one run of the binary.
type result struct {
	out, err string
	code     int
}

// emq runs the binary against addr with args; stdin is empty (not a terminal).
func emq(t *testing.T, addr string, args ...string) result {
	t.Helper()
	return emqIn(t, addr, "", args...)
}

func emqIn(t *testing.T, addr, stdin string, args ...string) result {
	t.Helper()
	return emqEnv(t, []string{"VALKEY_ADDR=" + addr}, stdin, args...)
}

// emqEnv runs the binary with env added to this process's environment.
func emqEnv(t *testing.T, env []string, stdin string, args ...string) result {
	t.Helper()
	cmd := exec.Command(emqBin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return result{out: out.String(), err: errb.String(), code: code}
}

// ok runs the binary and requires exit 0.
func ok(t *testing.T, addr string, args ...string) string {
	t.Helper()
	r := emq(t, addr, args...)
	require.Equalf(t, 0, r.code, "emq %s: stderr %s", strings.Join(args, " "), r.err)
	return r.out
}

// okJSON runs the binary with --json, requires exit 0 and decodes stdout into v.
func okJSON(t *testing.T, addr string, v any, args ...string) {
	t.Helper()
	out := ok(t, addr, append(args, "--json")...)
	reflect.ValueOf(v).Elem().SetZero() // a reused v keeps no field of an earlier run
	require.NoErrorf(t, json.Unmarshal([]byte(out), v), "emq %s --json printed %q", strings.Join(args, " "), out)
}

// lines is s split in lines, each with its runs of spaces collapsed to one.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		out = append(out, strings.Join(strings.Fields(l), " "))
	}
	return out
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	valkeytest.Eventually(t, 10*time.Second, what, cond)
}

// enqueueApart enqueues n jobs on queue, each minted in a later millisecond than the one
// before, and returns their ids in mint order.
func enqueueApart(t *testing.T, b *bus.Bus, queue string, n int) []keys.JobID {
	t.Helper()
	var ids []keys.JobID
	for range n {
		if k := len(ids); k > 0 {
			last := ids[k-1].Time().UnixMilli()
			waitFor(t, "the clock's next millisecond", func() bool { return time.Now().UnixMilli() > last })
		}
		e, err := b.Enqueue(context.Background(), queue, []byte("x"), nil)
		require.NoError(t, err)
		ids = append(ids, e.ID)
	}
	return ids
}

// sharedQueue is the shared server, a Bus on it and a queue name of the test's own.
func sharedQueue(t *testing.T) (*valkeytest.Server, *bus.Bus, string) {
	t.Helper()
	srv := valkeytest.Shared(t)
	b, err := bus.New(srv.Client(t), bus.Config{})
	require.NoError(t, err)
	return srv, b, valkeytest.TestName(t)
}
