package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/internal/valkeytest"
)

func TestMain(m *testing.M) { valkeytest.Main(m) }

// TestQuickstart builds the example and runs it against a throwaway server: it exits by
// itself, and its reads show the three tiers in order.
func TestQuickstart(t *testing.T) {
	t.Parallel()
	srv := valkeytest.Start(t, valkeytest.WithoutPersistence()) // fresh: the first read must miss
	bin := filepath.Join(t.TempDir(), "quickstart")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build:\n%s", out)

	run := exec.CommandContext(ctx, bin)
	run.Env = append(os.Environ(), "VALKEY_ADDR="+srv.Addr)
	out, err = run.CombinedOutput()
	require.NoError(t, err, "quickstart:\n%s", out)
	t.Logf("quickstart output:\n%s", out)

	tiers := regexp.MustCompile(`read (\d): user (\d+) +(.*?) +from (\S+)`).FindAllStringSubmatch(string(out), -1)
	require.Len(t, tiers, 5, "%s", out)
	for i, want := range []struct{ id, tier, what string }{
		{"42", "loader", "{ID:42 Name:Ada Lovelace}"},
		{"42", "L1", "{ID:42 Name:Ada Lovelace}"},
		{"42", "L2", "{ID:42 Name:Ada Lovelace}"},
		{"7", "loader", "cache: not found"},
		{"7", "L1", "cache: not found"},
	} {
		require.Equal(t, want.id, tiers[i][2], "read %d", i+1)
		require.Equal(t, want.what, tiers[i][3], "read %d", i+1)
		require.Equal(t, want.tier, tiers[i][4], "read %d", i+1)
	}
	require.Contains(t, string(out), "stats: L1 hits 2, L2 hits 1, loads 2")
}
