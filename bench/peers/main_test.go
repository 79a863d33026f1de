package peers

import (
	"testing"

	"github.com/echocache/echocache/internal/valkeytest"
)

// TestMain stops the shared valkey-server if this process started one
// (VALKEY_ADDR unset); under `make bench` the run's one server is used.
func TestMain(m *testing.M) { valkeytest.Main(m) }
