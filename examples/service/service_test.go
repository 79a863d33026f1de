package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/internal/valkeytest"
)

func TestMain(m *testing.M) { valkeytest.Main(m) }

// build compiles the service once per test into a temp dir.
func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "service")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin
}

func runDemoBin(t *testing.T, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"demo"}, args...)...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "demo failed:\n%s", out)
	return string(out)
}

// TestDemo runs the whole demo, short, against its own throwaway valkey-server: it must exit 0
// (no stale read, every job done) and print its summary.
func TestDemo(t *testing.T) {
	bin := build(t)
	out := runDemoBin(t, bin, "-duration", "4s", "-warmup", "1s", "-products", "5000", "-clients", "4", "-writes", "0.05")
	t.Log(out)
	require.Contains(t, out, "stale reads   0 beyond")
	require.Contains(t, out, "== summary ==")
	// Into a pipe, the progress is a line a second, not one line rewritten with carriage returns.
	require.NotContains(t, out, "\r")
	require.Regexp(t, `(?m)^ *[0-9.]+s +[0-9]+ requests +[0-9]+ req/s +0 errors$`, out)
}

// TestDemoKill kills instance B mid-run: the jobs it held are reaped and run by A, none lost.
func TestDemoKill(t *testing.T) {
	bin := build(t)
	out := runDemoBin(t, bin, "-duration", "6s", "-warmup", "1s", "-kill-at", "2s", "-products", "5000", "-clients", "4", "-writes", "0.05",
		"-valkey", valkeytest.Shared(t).Addr)
	t.Log(out)
	require.Contains(t, out, "killed instance B")
	require.Contains(t, out, "stale reads   0 beyond")
}

// TestBadRequests: every malformed request gets a 4xx with a message, and the instance lives on.
func TestBadRequests(t *testing.T) {
	bin := build(t)
	addr, err := freeAddr()
	require.NoError(t, err)
	db := filepath.Join(t.TempDir(), "catalog.db")
	cmd := exec.Command(bin, "serve", "-listen", addr, "-valkey", valkeytest.Shared(t).Addr, "-db", db, "-products", "100", "-name", "T")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 60*time.Second, 50*time.Millisecond)

	base := "http://" + addr
	for _, tc := range []struct {
		name, method, path, body string
		code                     int
		msg                      string
	}{
		{"non-numeric id", "GET", "/products/abc", "", 400, "not a positive integer"},
		{"negative id", "GET", "/products/-4", "", 400, "not a positive integer"},
		{"unknown id", "GET", "/products/999999", "", 404, "no such product"},
		{"unknown id write", "PUT", "/products/999999", `{"name":"x","price_cents":1}`, 404, "no such product"},
		{"malformed JSON", "PUT", "/products/1", `{"name":`, 400, "malformed JSON"},
		{"unknown field", "PUT", "/products/1", `{"nom":"x"}`, 400, "malformed JSON"},
		{"missing name", "PUT", "/products/1", `{"price_cents":5}`, 422, `"name" is required`},
		{"negative price", "PUT", "/products/1", `{"name":"x","price_cents":-1}`, 422, `"price_cents"`},
		{"oversized body", "PUT", "/products/1", `{"name":"` + strings.Repeat("x", 10_000) + `"}`, 413, "body over"},
		{"good read", "GET", "/products/1", "", 200, `"version"`},
		{"good write", "PUT", "/products/1", `{"name":"kettle","price_cents":1200}`, 200, `"job":"JOB_`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, base+tc.path, bytes.NewBufferString(tc.body))
			require.NoError(t, err)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			var buf bytes.Buffer
			_, _ = buf.ReadFrom(resp.Body)
			require.Equal(t, tc.code, resp.StatusCode, buf.String())
			if tc.code < 400 {
				require.Contains(t, buf.String(), tc.msg)
				return
			}
			var e map[string]string
			require.NoError(t, json.Unmarshal(buf.Bytes(), &e), "errors are JSON")
			require.Contains(t, e["error"], tc.msg)
		})
	}
	// A read after the write sees it (read-your-own-writes through the cache).
	resp, err := http.Get(base + "/products/1")
	require.NoError(t, err)
	defer resp.Body.Close()
	var p Product
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&p))
	require.Equal(t, "kettle", p.Name)
	// /metrics is Prometheus' exposition, from the client library.
	mresp, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	defer mresp.Body.Close()
	var mbuf bytes.Buffer
	_, _ = mbuf.ReadFrom(mresp.Body)
	require.Contains(t, mbuf.String(), `echocache_cache_l1_hits_total{instance="T"}`)
}
