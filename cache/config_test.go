package cache_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/cache"
)

// TestConfigErrors: a Config field out of range is refused with an error that wraps
// ErrInvalid and names the field; zero fields take their defaults.
func TestConfigErrors(t *testing.T) {
	t.Parallel()
	client := targets[0].client(t)
	for _, tc := range []struct {
		name  string
		cfg   cache.Config
		field string
	}{
		{"negative reconcile", cache.Config{ReconcileInterval: -time.Second}, "ReconcileInterval"},
		{"reconcile below 10ms", cache.Config{ReconcileInterval: 5 * time.Millisecond}, "ReconcileInterval"},
		{"negative subscribe timeout", cache.Config{SubscribeTimeout: -1}, "SubscribeTimeout"},
		{"negative subscribe buffer", cache.Config{SubscribeBuffer: -1}, "SubscribeBuffer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := cache.New(client, tc.cfg)
			require.Nil(t, c)
			require.ErrorIs(t, err, cache.ErrInvalid)
			require.ErrorContains(t, err, "Config."+tc.field)
		})
	}
	_, err := cache.New(nil, cache.Config{})
	require.ErrorIs(t, err, cache.ErrInvalid)
	require.ErrorContains(t, err, "nil valkey client")

	c, err := cache.New(client, cache.Config{ReconcileInterval: 10 * time.Millisecond})
	require.NoError(t, err, "10ms is the shortest interval")
	c.Close()
}
