package valkeytest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/internal/valkeytest"
)

func TestMain(m *testing.M) { valkeytest.Main(m) }

// maxStart is the most a server or cluster may take to start.
const maxStart = 10 * time.Second

func ping(ctx context.Context, c valkey.Client) error {
	return c.Do(ctx, c.B().Ping().Build()).Error()
}

func TestSharedPingSetGet(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := valkeytest.Shared(t)
	require.Same(t, s, valkeytest.Shared(t), "Shared returns one server per process")
	c := s.Client(t)

	pong, err := c.Do(ctx, c.B().Ping().Build()).ToString()
	require.NoError(t, err)
	assert.Equal(t, "PONG", pong)

	key := "valkeytest:" + t.Name()
	require.NoError(t, c.Do(ctx, c.B().Set().Key(key).Value("v1").Build()).Error())
	got, err := c.Do(ctx, c.B().Get().Key(key).Build()).ToString()
	require.NoError(t, err)
	assert.Equal(t, "v1", got)

	got, err = s.Do(ctx, "GET", key)
	require.NoError(t, err)
	assert.Equal(t, "v1", got)
	_, err = s.Do(ctx, "GET", key+":missing")
	assert.True(t, valkey.IsValkeyNil(err), "missing key: %v", err)
}

func TestSharedRefusesFaults(t *testing.T) {
	t.Parallel()
	s := valkeytest.Shared(t)
	assert.Error(t, s.Kill())
	assert.Error(t, s.Stop())
	assert.Error(t, s.Continue())
	assert.Error(t, s.Restart())
	s.Close() // no-op on the shared server
	require.NoError(t, ping(t.Context(), s.Client(t)))
}

func TestKillRestartKeepsAOFData(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := valkeytest.Start(t, valkeytest.WithConfig("appendfsync", "always"))
	addr := s.Addr
	c := s.Client(t)
	key := "valkeytest:" + t.Name()
	require.NoError(t, c.Do(ctx, c.B().Set().Key(key).Value("survives").Build()).Error())

	require.NoError(t, s.Kill())
	_, err := s.Do(ctx, "PING")
	require.Error(t, err, "PING after Kill")

	require.NoError(t, s.Restart())
	assert.Equal(t, addr, s.Addr, "same address after Restart")
	got, err := s.Client(t).Do(ctx, s.Client(t).B().Get().Key(key).Build()).ToString()
	require.NoError(t, err)
	assert.Equal(t, "survives", got)
	_, err = os.Stat(filepath.Join(s.Dir, "appendonlydir"))
	assert.NoError(t, err, "AOF directory in Dir")

	s.Close()
	_, err = os.Stat(s.Dir)
	assert.True(t, os.IsNotExist(err), "Close removes Dir: %v", err)
}

func TestStopContinue(t *testing.T) {
	t.Parallel()
	s := valkeytest.Start(t, valkeytest.WithoutPersistence())
	c := s.Client(t)
	require.NoError(t, ping(t.Context(), c))

	require.NoError(t, s.Stop())
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	start := time.Now()
	err := ping(ctx, c)
	cancel()
	require.Error(t, err, "PING to a stopped server")
	assert.Less(t, time.Since(start), 2*time.Second)

	require.NoError(t, s.Continue())
	ctx, cancel = context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	require.NoError(t, ping(ctx, c), "PING after Continue")
}

func TestStartTimesAndCluster(t *testing.T) {
	t.Parallel()
	ctx := t.Context()

	t0 := time.Now()
	valkeytest.Start(t)
	serverTime := time.Since(t0)
	t0 = time.Now()
	cl := valkeytest.StartCluster(t)
	clusterTime := time.Since(t0)
	t.Logf("start times: server %v, cluster %v", serverTime, clusterTime)
	assert.Less(t, serverTime, maxStart, "server start")
	assert.Less(t, clusterTime, maxStart, "cluster start")

	primaries := cl.Primaries()
	require.Len(t, primaries, 3)
	require.Len(t, cl.Replicas(), 3)
	for _, p := range primaries {
		assert.Len(t, cl.ReplicasOf(p), 1, "replicas of %s", p.Addr)
	}

	for _, n := range cl.Nodes {
		info, err := n.Do(ctx, "CLUSTER", "INFO")
		require.NoError(t, err)
		assert.Contains(t, info, "cluster_state:ok", n.Addr)
	}

	c := cl.Client(t)
	slots := map[string]bool{}
	for i := range 200 {
		key := fmt.Sprintf("valkeytest:%s:%d", t.Name(), i)
		val := fmt.Sprint(i)
		require.NoError(t, c.Do(ctx, c.B().Set().Key(key).Value(val).Build()).Error())
		got, err := c.Do(ctx, c.B().Get().Key(key).Build()).ToString()
		require.NoError(t, err)
		require.Equal(t, val, got)
		slot, err := primaries[0].Do(ctx, "CLUSTER", "KEYSLOT", key)
		require.NoError(t, err)
		slots[slot] = true
	}
	assert.Greater(t, len(slots), 150, "keys spread over many slots")
	for _, p := range primaries {
		n, err := p.Do(ctx, "DBSIZE")
		require.NoError(t, err)
		assert.NotEqual(t, "0", n, "primary %s got keys", p.Addr)
	}

	// A node's own client talks to that node only.
	role, err := primaries[0].Client(t).Do(ctx, c.B().Role().Build()).ToArray()
	require.NoError(t, err)
	first, _ := role[0].ToString()
	assert.Equal(t, "master", first)
}

func TestSharedCluster(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cl := valkeytest.SharedCluster(t)
	require.Same(t, cl, valkeytest.SharedCluster(t))
	c := cl.Client(t)
	key := "valkeytest:" + t.Name()
	require.NoError(t, c.Do(ctx, c.B().Set().Key(key).Value("x").Build()).Error())
	got, err := c.Do(ctx, c.B().Get().Key(key).Build()).ToString()
	require.NoError(t, err)
	assert.Equal(t, "x", got)

	assert.Error(t, cl.Failover(ctx, 0), "no failover on the shared cluster")
	assert.Error(t, cl.Nodes[0].Kill(), "no fault on shared cluster nodes")
}

func TestFailover(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cl := valkeytest.StartCluster(t)
	c := cl.Client(t)
	key := "valkeytest:" + t.Name()
	require.NoError(t, c.Do(ctx, c.B().Set().Key(key).Value("before").Build()).Error())

	slotStr, err := cl.Nodes[0].Do(ctx, "CLUSTER", "KEYSLOT", key)
	require.NoError(t, err)
	var slot uint16
	_, err = fmt.Sscan(slotStr, &slot)
	require.NoError(t, err)

	old := cl.PrimaryForSlot(slot)
	require.NotNil(t, old)
	replicas := cl.ReplicasOf(old)
	require.Len(t, replicas, 1)

	t0 := time.Now()
	require.NoError(t, cl.Failover(ctx, slot))
	t.Logf("failover of slot %d took %v", slot, time.Since(t0))

	assert.Same(t, replicas[0], cl.PrimaryForSlot(slot), "replica became primary of slot")
	assert.Contains(t, cl.ReplicasOf(replicas[0]), old, "old primary became its replica")
	role, err := replicas[0].Do(ctx, "ROLE")
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(role, "master\n"), "ROLE of new primary: %q", role)

	got, err := c.Do(ctx, c.B().Get().Key(key).Build()).ToString()
	require.NoError(t, err)
	assert.Equal(t, "before", got)
	require.NoError(t, c.Do(ctx, c.B().Set().Key(key).Value("after").Build()).Error())
}
