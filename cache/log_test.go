package cache_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/tables"
)

// records is a slog.Handler that keeps the messages of records naming one table.
type records struct {
	table string
	mu    sync.Mutex
	msgs  []string
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "table" && a.Value.String() == r.table {
			r.mu.Lock()
			r.msgs = append(r.msgs, rec.Message)
			r.mu.Unlock()
		}
		return true
	})
	return nil
}

func (r *records) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.msgs...)
}

// TestBackgroundFailuresReachDefaultLogger: with no Config.Logger, a background failure (an
// unreadable invalidation message, which the subscriber drops with a flush) is logged to
// slog.Default(), as a worker's are; with Config.Logger set, it goes there instead. Not
// parallel: it replaces the process's default logger while it runs.
func TestBackgroundFailuresReachDefaultLogger(t *testing.T) {
	client := valkeytest.Shared(t).Client(t)
	ctx := context.Background()
	for _, own := range []bool{false, true} {
		name := tableName(t)
		def, mine := &records{table: name}, &records{table: name}
		prev := slog.Default()
		slog.SetDefault(slog.New(def))
		cfg := cache.Config{}
		if own {
			cfg.Logger = slog.New(mine)
		}
		c, err := cache.New(client, cfg)
		require.NoError(t, err)
		newTable(t, c, tables.Spec{Name: name, L2Timeout: relaxedL2}, &source{})
		cmd := client.B().Spublish().Channel(keys.MustTable(name).Inval()).Message("not an invalidation").Build()
		require.NoError(t, client.Do(ctx, cmd).Error())
		want, other := def, mine
		if own {
			want, other = mine, def
		}
		valkeytest.Eventually(t, 10*time.Second, "the failure to be logged", func() bool { return len(want.got()) > 0 })
		require.Equal(t, "cache: unreadable invalidation message; flushing the table", want.got()[0])
		c.Close()
		slog.SetDefault(prev)
		require.Empty(t, other.got(), "own logger %v", own)
	}
}
