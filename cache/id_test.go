package cache

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func mathExp(x float64) float64 { return math.Exp(x) }

type namedString string
type namedInt int64
type namedU32 uint32

func TestIDOps(t *testing.T) {
	t.Parallel()
	check := func(t *testing.T, format func() string, want string, parse func(string) error) {
		t.Helper()
		require.Equal(t, want, format())
		require.NoError(t, parse(want))
	}
	t.Run("string", func(t *testing.T) {
		ops := opsFor[string]()
		check(t, func() string { return ops.format("a:b") }, "a:b", func(s string) error {
			k, err := ops.parse(s)
			require.Equal(t, "a:b", k)
			return err
		})
		h1, c1 := ops.hash("x")
		h2, c2 := ops.hash("y")
		require.NotEqual(t, [2]uint64{h1, c1}, [2]uint64{h2, c2})
		require.NotZero(t, c1, "string ids carry a conflict hash")
	})
	t.Run("named string", func(t *testing.T) {
		ops := opsFor[namedString]()
		require.Equal(t, "sku-1", ops.format("sku-1"))
		k, err := ops.parse("sku-1")
		require.NoError(t, err)
		require.Equal(t, namedString("sku-1"), k)
		h, c := ops.hash("sku-1")
		hs, cs := opsFor[string]().hash("sku-1")
		require.Equal(t, [2]uint64{hs, cs}, [2]uint64{h, c}, "a named string hashes like its string")
	})
	t.Run("int64", func(t *testing.T) {
		ops := opsFor[namedInt]()
		for _, v := range []namedInt{0, 1, -1, math.MaxInt64, math.MinInt64} {
			s := ops.format(v)
			back, err := ops.parse(s)
			require.NoError(t, err)
			require.Equal(t, v, back)
			h, c := ops.hash(v)
			require.Equal(t, uint64(v), h, "an integer id is its own hash")
			require.Zero(t, c)
		}
		require.Equal(t, "-42", ops.format(-42))
		_, err := ops.parse("4x")
		require.Error(t, err)
	})
	t.Run("uint32", func(t *testing.T) {
		ops := opsFor[namedU32]()
		require.Equal(t, "4294967295", ops.format(math.MaxUint32))
		v, err := ops.parse("4294967295")
		require.NoError(t, err)
		require.Equal(t, namedU32(math.MaxUint32), v)
		_, err = ops.parse("4294967296")
		require.Error(t, err, "out of range for the kind")
		_, err = ops.parse("-1")
		require.Error(t, err)
	})
	t.Run("int32", func(t *testing.T) {
		ops := opsFor[int32]()
		require.Equal(t, "-5", ops.format(-5))
		v, err := ops.parse("-5")
		require.NoError(t, err)
		require.Equal(t, int32(-5), v)
		h, _ := ops.hash(-5)
		require.Equal(t, uint64(math.MaxUint64-4), h, "sign-extended")
	})
	t.Run("uint and int", func(t *testing.T) {
		require.Equal(t, "18446744073709551615", opsFor[uint]().format(math.MaxUint))
		require.Equal(t, "7", opsFor[int]().format(7))
		v, err := opsFor[uint64]().parse("18446744073709551615")
		require.NoError(t, err)
		require.Equal(t, uint64(math.MaxUint64), v)
	})
}
