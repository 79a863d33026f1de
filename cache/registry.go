package cache

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/keys"
)

// The table registry: ecc:tables, one sorted set outside any hash tag (keys.TableRegistry),
// scored by the unix ms a table was first declared. Each Cache adds the tables it declares
// with ZADD NX, once per table and minute, from its background publisher (publish.go), so
// an entry lost while the table is in use comes back, and NewTable pays
// no round trip for it. Tools list every table, on a cluster too, with one ZRANGE: the set is
// in one slot, where SCAN would walk every key of every primary.

// TableInfo is one table of the registry.
type TableInfo struct {
	Name string
	// FirstSeen is when a cache first declared the table, by that cache's clock.
	FirstSeen time.Time
}

// Tables lists every table of the registry, sorted by name: the tables any Cache declared,
// whether or not rows of them remain. It is one ZRANGE of one set, on a standalone server or
// a cluster. A Cache lists a table within moments of its declaration (in the background,
// retried until it succeeds) and again each minute while it is declared; a table stays listed
// until an operator removes it (ZREM ecc:tables <name>) once no Cache declares it. It needs no Cache: tools in another process call it with their
// own client.
func Tables(ctx context.Context, client valkey.Client) ([]TableInfo, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: Tables: nil valkey client", ErrInvalid)
	}
	cmd := client.B().Zrange().Key(keys.TableRegistry()).Min("0").Max("-1").Withscores().Build()
	entries, err := client.Do(ctx, cmd).AsZScores()
	if err != nil {
		return nil, fmt.Errorf("cache: Tables: %w", err)
	}
	out := make([]TableInfo, 0, len(entries))
	for _, e := range entries {
		if keys.ValidateName(e.Member) != nil {
			return nil, fmt.Errorf("cache: Tables: %s holds %q, not a table name", keys.TableRegistry(), e.Member)
		}
		out = append(out, TableInfo{Name: e.Member, FirstSeen: time.UnixMilli(int64(e.Score))})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// listTable adds name to the registry (ZADD NX keeps the first declaration's time).
func listTable(ctx context.Context, client valkey.Client, name string) error {
	cmd := client.B().Zadd().Key(keys.TableRegistry()).Nx().ScoreMember().
		ScoreMember(float64(time.Now().UnixMilli()), name).Build()
	return client.Do(ctx, cmd).Error()
}
