package bench

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/internal/valkeytest"
)

// getSide is a raw valkey-go GET of a fresh row, on a client of its own, as a Compare side.
func getSide(b *testing.B, name string) Side {
	b.Helper()
	return getSideOn(b, valkeytest.Shared(b).Client(b), name)
}

// getSideOn is getSide on the client c: the baseline of a comparison with our code on c (see
// the package doc: one client for both sides).
func getSideOn(b *testing.B, c valkey.Client, name string) Side {
	b.Helper()
	ctx := context.Background()
	key := rowKey(b, benchTable(b), rowID)
	require.NoError(b, c.Do(ctx, c.B().Set().Key(key).Value(valkey.BinaryString(SampleRowJSON(rowID))).Px(rowTTL).Build()).Error())
	return Side{Name: name, Op: func(b *testing.B) {
		if _, err := c.Do(ctx, c.B().Get().Key(key).Build()).AsBytes(); err != nil {
			b.Fatal(err)
		}
	}}
}

// BenchmarkCompareGetAA compares raw GET with itself, interleaved: the noise
// floor of every interleaved ratio on this machine. Its ratio should be 1×;
// how far it strays is how far an interleaved ratio can be trusted.
func BenchmarkCompareGetAA(b *testing.B) {
	b.ReportAllocs()
	Compare(b, getSide(b, "a"), getSide(b, "b"))
}

// BenchmarkCompareTierGap is the tier gap of the raw building blocks,
// interleaved: a raw GET over a raw ristretto Get of the same row (the seed
// says 40×).
func BenchmarkCompareTierGap(b *testing.B) {
	c, key := newRistretto(b)
	b.ReportAllocs()
	Compare(b, getSide(b, "get"), Side{Name: "ristretto", Op: func(b *testing.B) {
		if _, ok := ristrettoGet(c, key); !ok {
			b.Fatal("miss")
		}
	}})
}
