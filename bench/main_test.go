package bench

import (
	"testing"

	"github.com/echocache/echocache/internal/valkeytest"
)

// TestMain stops the shared valkey-server (if this process started one) when
// the benchmarks end. `make bench` sets VALKEY_ADDR, so every benchmark binary
// of the run talks to the one server the run started.
func TestMain(m *testing.M) { valkeytest.Main(m) }
