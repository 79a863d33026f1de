package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/echotest"
	"github.com/echocache/echocache/internal/valkeytest"
)

// echotest.Main is valkeytest.Main for users: one shared server for the package's tests.
func TestMain(m *testing.M) { echotest.Main(m) }

// TestExample builds the program once and runs it against a throwaway server, as a newcomer
// would with VALKEY_ADDR set: it must exit 0 by itself with every job completed and the queue
// empty.
func TestExample(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Shared(t)
	bin := filepath.Join(t.TempDir(), "jobs")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	const queue = "TestExample-jobs"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-queue", queue, "-jobs", "20", "-timeout", "60s")
	cmd.Env = append(os.Environ(), "VALKEY_ADDR="+srv.Addr)
	out, err = cmd.CombinedOutput()
	t.Logf("output:\n%s", out)
	require.NoError(t, err)
	require.Contains(t, string(out), "enqueued 20 jobs")
	require.Contains(t, string(out), "duplicate=true")
	require.Contains(t, string(out), "completed 20 jobs, 5 after a retry; left: pending 0, active 0, scheduled 0, dead 0")

	b, err := bus.New(srv.Client(t), bus.Config{})
	require.NoError(t, err)
	counts, err := b.Counts(context.Background(), queue)
	require.NoError(t, err)
	require.Equal(t, bus.Counts{}, counts)
}
