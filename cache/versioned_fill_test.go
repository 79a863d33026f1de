package cache_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/tables"
)

// TestVersionedFillOverOlderSet: a fill loads revision 5 while a late Set of revision 4 (a
// writer that committed 4 before 5 was committed) replaces the fill's lease. cache_fill
// refuses the fill's row, but the value it loaded is newer than the row that replaced its
// lease, so it is written as a Set writes it: L2 ends at 5 and another process that read 4
// in between drops it.
func TestVersionedFillOverOlderSet(t *testing.T) {
	for _, many := range []bool{false, true} {
		name := "Get"
		if many {
			name = "GetMany"
		}
		t.Run(name, func(t *testing.T) {
			srv := valkeytest.Shared(t)
			client := srv.Client(t)
			ctx := context.Background()
			id := "id00"
			entered, release := make(chan struct{}), make(chan struct{})
			load := func(ctx context.Context, id string) (rev, error) {
				entered <- struct{}{}
				<-release
				return rev{ID: id, Rev: 5}, nil
			}
			spec := tables.Spec{Name: tableName(t), TTL: time.Minute, DegradedLoads: tables.Off, L2Timeout: relaxedL2}
			filler, err := cache.NewTable(newCache(t, client), spec, load, &cache.TableOpts[string, rev]{Version: revOf})
			require.NoError(t, err)
			writer := versionedTable(t, newCache(t, client), spec.Name, newTruth(1))
			require.Eventually(t, func() bool { return filler.Synced() && writer.Synced() }, 5*time.Second, time.Millisecond)

			type result struct {
				v   rev
				err error
			}
			done := make(chan result, 1)
			go func() {
				if many {
					m, err := filler.GetMany(ctx, []string{id})
					done <- result{m[id], err}
					return
				}
				v, err := filler.Get(ctx, id)
				done <- result{v, err}
			}()
			<-entered // the fill holds the lease and is loading
			require.NoError(t, writer.Set(ctx, id, rev{ID: id, Rev: 4}))
			got, err := writer.Get(ctx, id)
			require.NoError(t, err)
			require.EqualValues(t, 4, got.Rev, "the late Set's value is in L2 for now")
			close(release)
			r := <-done
			require.NoError(t, r.err)
			require.EqualValues(t, 5, r.v.Rev)

			p, h := l2Rev(t, client, writer, id)
			require.Equal(t, [2]uint64{5, 5}, [2]uint64{p, h}, "the newer load replaced the older Set's row")
			require.Zero(t, filler.Stats().FillsRefused, "the fill's value landed")
			valkeytest.Eventually(t, 5*time.Second, "the writer's L1 dropped revision 4", func() bool {
				got, err := writer.Get(ctx, id)
				return err == nil && got.Rev == 5
			})
		})
	}
}
