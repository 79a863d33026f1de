package cache_test

import (
	"bytes"
	"compress/flate"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/tables"
)

// bomb is a compressed table's payload (the DEFLATE marker, then one fixed-Huffman block)
// that inflates to a JSON string of n bytes, `"aaa…a"`, n >= 3: a literal quote and a, then
// copies of 258 bytes at distance 1 (13 bits each, a ratio of about 160), literal a's for
// the rest and the closing quote. Built by hand: compress/flate takes seconds under the race
// detector to compress 64 MiB.
func bomb(n int) []byte {
	out := []byte{1}
	var acc uint64
	var nbits uint
	put := func(v uint64, bits uint) { // v's low bits, least significant first
		acc |= v << nbits
		for nbits += bits; nbits >= 8; nbits -= 8 {
			out = append(out, byte(acc))
			acc >>= 8
		}
	}
	code := func(c uint64, bits uint) { // a Huffman code, most significant bit first
		for i := int(bits) - 1; i >= 0; i-- {
			put(c>>uint(i)&1, 1)
		}
	}
	literal := func(b byte) { code(0x30+uint64(b), 8) } // literals 0-143: 8 bits from 00110000
	put(1, 1)                                           // BFINAL
	put(1, 2)                                           // BTYPE 01: fixed Huffman codes
	literal('"')
	literal('a')
	left := n - 3 // a's still to write before the closing quote
	for ; left >= 258; left -= 258 {
		code(0xc5, 8) // length 258: code 285, 11000101
		code(0, 5)    // distance 1
	}
	for ; left > 0; left-- {
		literal('a')
	}
	literal('"')
	code(0, 7) // end of block: code 256, 0000000
	if nbits > 0 {
		out = append(out, byte(acc))
	}
	return out
}

// TestCompressBomb checks the helper: its payload inflates to the JSON string it says.
func TestCompressBomb(t *testing.T) {
	for _, n := range []int{3, 4, 261, 262, 1000, 5000} {
		p, err := io.ReadAll(flate.NewReader(bytes.NewReader(bomb(n)[1:])))
		require.NoError(t, err, n)
		require.Equal(t, `"`+strings.Repeat("a", n-2)+`"`, string(p), n)
	}
}

// TestCompressBoundRefills: a row whose payload inflates past the bound (a bomb, a hundred
// times its size inflated) is unreadable like any row that does not decode: the read refills
// it and counts it corrupt, instead of serving it. The bound is lowered to 1 MiB from
// cache.MaxInflatedPayload: inflating 64 MiB takes seconds under the race detector.
func TestCompressBoundRefills(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := valkeytest.Shared(t).Client(t)
	spec := tables.Spec{Name: tableName(t), L1TTL: tables.Off, L2Timeout: relaxedL2}
	tbl, err := cache.NewTable(newCache(t, client), spec, func(_ context.Context, id string) (string, error) {
		return "loaded " + id, nil
	}, &cache.TableOpts[string, string]{CompressAbove: 1})
	require.NoError(t, err)
	const bound = 1 << 20
	cache.SetInflateBound(tbl, bound)

	payload := bomb(bound + 1)
	row := cache.ValueRow("otherfiller12345", time.Millisecond, time.Now().Add(time.Minute).UnixMilli(), payload)
	key := rowKey(t, tbl, "k")
	require.NoError(t, client.Do(ctx, client.B().Set().Key(key).Value(row).Px(time.Minute).Build()).Error())

	got, tier, err := tbl.Lookup(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, cache.TierFill, tier, "the bomb is refilled, not served")
	require.Equal(t, "loaded k", got)
	require.Equal(t, int64(1), tbl.Stats().CorruptRows)

	got, tier, err = tbl.Lookup(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, cache.TierL2, tier, "the refill replaced the row")
	require.Equal(t, "loaded k", got)
}
