package cache_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/tables"
)

type doc struct {
	ID   string   `json:"id"`
	Body string   `json:"body"`
	Tags []string `json:"tags"`
}

// TestCodecs: msgpack and compressed rows round-trip through L2 between two caches; a
// compressed table writes small payloads plain and large ones deflated (one marker byte
// says which); a row the table cannot read (written by another codec) is refilled, not
// served; a negative CompressAbove is refused.
func TestCodecs(t *testing.T) {
	t.Parallel()
	eachTarget(t, func(t *testing.T, client valkey.Client) {
		ctx := context.Background()
		big := strings.Repeat("all work and no play makes a dull row. ", 200)
		load := func(_ context.Context, id string) (doc, error) {
			if strings.HasPrefix(id, "big") {
				return doc{ID: id, Body: big, Tags: []string{"a", "b"}}, nil
			}
			return doc{ID: id, Body: "small", Tags: []string{"x"}}, nil
		}
		for _, tc := range []struct {
			name string
			opts cache.TableOpts[string, doc]
		}{
			{"msgpack", cache.TableOpts[string, doc]{Codec: cache.Msgpack[doc]{}}},
			{"json-compressed", cache.TableOpts[string, doc]{CompressAbove: 1024}},
			{"msgpack-compressed", cache.TableOpts[string, doc]{Codec: cache.Msgpack[doc]{}, CompressAbove: 1024}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				spec := tables.Spec{Name: tableName(t), L2Timeout: relaxedL2, DegradedLoads: tables.Off}
				w, err := cache.NewTable(newCache(t, client), spec, load, &tc.opts)
				require.NoError(t, err)
				var loads int
				r, err := cache.NewTable(newCache(t, client), spec, func(ctx context.Context, id string) (doc, error) {
					loads++
					return load(ctx, id)
				}, &tc.opts)
				require.NoError(t, err)
				for _, id := range []string{"big1", "small1"} {
					want, _ := load(ctx, id)
					got, err := w.Get(ctx, id)
					require.NoError(t, err)
					require.Equal(t, want, got)
					got, tier, err := r.Lookup(ctx, id)
					require.NoError(t, err)
					require.Equal(t, cache.TierL2, tier, "%s read from the row the other cache filled", id)
					require.Equal(t, want, got)
					payload := cache.ParsedPayload(readRaw(t, client, rowKey(t, w, id)))
					if tc.opts.CompressAbove > 0 {
						marker := byte(0)
						if id == "big1" {
							marker = 1
							require.Less(t, len(payload), len(big)/4, "the large value was compressed")
						}
						require.Equal(t, marker, payload[0], id)
					} else {
						require.NotContains(t, payload, `"body"`, "msgpack, not JSON")
					}
				}
				require.Zero(t, loads)
				got, err := r.GetMany(ctx, []string{"big1", "small1", "big2"})
				require.NoError(t, err)
				require.Len(t, got, 3)
				require.Equal(t, big, got["big2"].Body)
			})
		}

		t.Run("another codec's row is refilled", func(t *testing.T) {
			spec := tables.Spec{Name: tableName(t), L2Timeout: relaxedL2, DegradedLoads: tables.Off}
			plain, err := cache.NewTable(newCache(t, client), spec, load, nil)
			require.NoError(t, err)
			_, err = plain.Get(ctx, "big1")
			require.NoError(t, err)
			packed, err := cache.NewTable(newCache(t, client), spec, load, &cache.TableOpts[string, doc]{CompressAbove: 1})
			require.NoError(t, err)
			got, tier, err := packed.Lookup(ctx, "big1")
			require.NoError(t, err)
			require.Equal(t, cache.TierFill, tier)
			require.Equal(t, big, got.Body)
			require.Equal(t, int64(1), packed.Stats().CorruptRows)
		})

		t.Run("negative CompressAbove", func(t *testing.T) {
			_, err := cache.NewTable(newCache(t, client), tables.Spec{Name: tableName(t)}, load, &cache.TableOpts[string, doc]{CompressAbove: -1})
			require.ErrorIs(t, err, cache.ErrInvalid)
			require.ErrorContains(t, err, "CompressAbove")
		})
	})
}

// event and eventDraft share a table's rows: a draft's missing time is written as nil, on
// which the msgpack library panics when it decodes a time.Time.
type (
	event struct {
		ID string    `json:"id"`
		At time.Time `json:"at"`
	}
	eventDraft struct {
		ID string     `json:"id"`
		At *time.Time `json:"at"`
	}
)

// TestCodecPanicRefills: a row whose decode panics is unreadable: the read refills it and
// counts it corrupt, and nothing panics in the caller.
func TestCodecPanicRefills(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := valkeytest.Shared(t).Client(t)
	spec := tables.Spec{Name: tableName(t), L1TTL: tables.Off, L2Timeout: relaxedL2}
	drafts, err := cache.NewTable(newCache(t, client), spec, func(_ context.Context, id string) (eventDraft, error) {
		return eventDraft{ID: id}, nil
	}, &cache.TableOpts[string, eventDraft]{Codec: cache.Msgpack[eventDraft]{}})
	require.NoError(t, err)
	require.NoError(t, drafts.Set(ctx, "e1", eventDraft{ID: "e1"}))

	at := time.Unix(1_700_000_000, 0)
	events, err := cache.NewTable(newCache(t, client), spec, func(_ context.Context, id string) (event, error) {
		return event{ID: id, At: at}, nil
	}, &cache.TableOpts[string, event]{Codec: cache.Msgpack[event]{}})
	require.NoError(t, err)
	got, tier, err := events.Lookup(ctx, "e1")
	require.NoError(t, err)
	require.Equal(t, cache.TierFill, tier)
	require.True(t, at.Equal(got.At))
	require.Equal(t, int64(1), events.Stats().CorruptRows)
}
