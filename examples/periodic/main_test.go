package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/internal/valkeytest"
)

func TestMain(m *testing.M) { valkeytest.Main(m) }

var ranLine = regexp.MustCompile(`(?m)^ran reconcile tick (\S+) in (\S+)$`)
var firedLine = regexp.MustCompile(`(?m)^(\S+) stopped: fired (\d+) ticks`)

// TestTwoProcesses builds the program and runs it twice at once against one server, as the
// package doc says: every reconciliation tick in the run is run exactly once, by one of the
// two processes, with no tick missing between the first and the last.
func TestTwoProcesses(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Shared(t)
	bin := filepath.Join(t.TempDir(), "periodic")
	build := exec.Command("go", "build", "-o", bin, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	const every = 200 * time.Millisecond
	queue := "TestTwoProcesses-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var outs [2]bytes.Buffer
	var cmds [2]*exec.Cmd
	for i, name := range []string{"a", "b"} {
		cmds[i] = exec.CommandContext(ctx, bin, "-queue", queue, "-process", name, "-every", every.String(), "-for", "4s")
		cmds[i].Env = append(os.Environ(), "VALKEY_ADDR="+srv.Addr)
		cmds[i].Stdout, cmds[i].Stderr = &outs[i], &outs[i]
		require.NoError(t, cmds[i].Start())
	}
	for i := range cmds {
		require.NoError(t, cmds[i].Wait(), "process %d:\n%s", i, outs[i].String())
	}
	all := outs[0].String() + outs[1].String()
	t.Logf("output:\n%s", all)
	require.Contains(t, all, "schedule eod-report: next tick ")

	ran := map[time.Time]string{}
	for _, m := range ranLine.FindAllStringSubmatch(all, -1) {
		tick, err := time.Parse(time.RFC3339Nano, m[1])
		require.NoError(t, err)
		require.Empty(t, ran[tick], "tick %s ran twice (%s and %s)", m[1], ran[tick], m[2])
		ran[tick] = m[2]
	}
	ticks := make([]time.Time, 0, len(ran))
	for tick := range ran {
		require.Zero(t, tick.UnixMilli()%every.Milliseconds(), "tick %s is not a multiple of the period", tick)
		ticks = append(ticks, tick)
	}
	sort.Slice(ticks, func(i, j int) bool { return ticks[i].Before(ticks[j]) })
	require.GreaterOrEqual(t, len(ticks), 10, "a 4 s run of a 200 ms schedule")
	for i := 1; i < len(ticks); i++ {
		require.Equal(t, every, ticks[i].Sub(ticks[i-1]), "a gap after tick %s", ticks[i-1])
	}
	fired := 0
	for _, m := range firedLine.FindAllStringSubmatch(all, -1) {
		n, _ := strconv.Atoi(m[2])
		fired += n
	}
	require.GreaterOrEqual(t, fired, len(ticks), "every tick run was fired by one of the two")
}
