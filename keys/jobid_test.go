package keys_test

import (
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/keys"
)

func TestJobIDMonotonic(t *testing.T) {
	t.Parallel()
	prev := keys.NewJobID().String()
	for i := range 1_000_000 {
		id := keys.NewJobID().String()
		if id <= prev {
			t.Fatalf("id %d: %s not after %s", i, id, prev)
		}
		prev = id
	}
}

func TestJobIDUniqueAcrossGoroutines(t *testing.T) {
	t.Parallel()
	const goroutines, each = 8, 100_000
	out := make([][]keys.JobID, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			ids := make([]keys.JobID, each)
			for i := range ids {
				ids[i] = keys.NewJobID()
			}
			out[g] = ids
		})
	}
	wg.Wait()
	seen := make(map[keys.JobID]struct{}, goroutines*each)
	for _, ids := range out {
		for i, id := range ids {
			if i > 0 {
				require.Less(t, ids[i-1].String(), id.String(), "each goroutine sees increasing ids")
			}
			seen[id] = struct{}{}
		}
	}
	require.Len(t, seen, goroutines*each)
}

func TestJobIDTimeAndParse(t *testing.T) {
	t.Parallel()
	for range 1000 {
		before := time.Now().Truncate(time.Millisecond)
		id := keys.NewJobID()
		after := time.Now()
		mint := id.Time()
		require.False(t, mint.Before(before.Add(-time.Millisecond)), "mint %v before %v", mint, before)
		require.False(t, mint.After(after.Add(time.Millisecond)), "mint %v after %v", mint, after)

		s := id.String()
		require.Len(t, s, keys.JobIDLen)
		require.Equal(t, "JOB_", s[:4])
		back, err := keys.ParseJobID(s)
		require.NoError(t, err)
		require.Equal(t, id, back)
	}
	require.True(t, keys.JobID{}.IsZero())
	require.True(t, keys.JobID{}.Time().IsZero())
	for _, s := range []string{"", "JOB_", "job_01ARZ3NDEKTSV4RRFFQ69G5FAV", "JOB_01ARZ3NDEKTSV4RRFFQ69G5FAI",
		"JOB_81ARZ3NDEKTSV4RRFFQ69G5FAV", "JOB_01arz3ndektsv4rrffq69g5fav", "ULID01ARZ3NDEKTSV4RRFFQ69G5FAV"} {
		_, err := keys.ParseJobID(s)
		require.ErrorIs(t, err, keys.ErrInvalid, s)
	}
	// The ULID spec example: 01ARZ3NDEK is 1469922850259 ms.
	id, err := keys.ParseJobID("JOB_01ARZ3NDEKTSV4RRFFQ69G5FAV")
	require.NoError(t, err)
	require.Equal(t, int64(1469922850259), id.Time().UnixMilli())
}

func BenchmarkNewJobID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		keys.NewJobID()
	}
}

// TestJobIDFloor: the floor of a time sorts between the ids minted before and after it.
func TestJobIDFloor(t *testing.T) {
	t.Parallel()
	id := keys.NewJobID()
	floor := keys.JobIDFloor(id.Time())
	_, err := keys.ParseJobID(floor)
	require.NoError(t, err, "a floor is a valid id text")
	require.LessOrEqual(t, floor, id.String())
	require.Equal(t, id.String()[:14], floor[:14], "same time characters")
	require.Greater(t, floor, keys.JobIDFloor(id.Time().Add(-time.Millisecond)))
	require.Less(t, id.String(), keys.JobIDFloor(id.Time().Add(time.Millisecond)))
	require.Equal(t, "JOB_00000000000000000000000000", keys.JobIDFloor(time.UnixMilli(-5)))
	require.Equal(t, "JOB_7ZZZZZZZZZ0000000000000000", keys.JobIDFloor(time.UnixMilli(1<<50)))
	// Far past the 48-bit range, where UnixMilli overflows: still the last millisecond (it
	// read as the epoch, and a Browse with such a To listed nothing).
	require.Equal(t, "JOB_7ZZZZZZZZZ0000000000000000", keys.JobIDFloor(time.Unix(1<<62, 0)))
	require.Equal(t, "JOB_00000000000000000000000000", keys.JobIDFloor(time.Unix(-1<<62, 0)))
}

// TestJobIDText: a JobID is its text in JSON (it was {}, its field unexported), and reads
// back; the zero JobID is "", and a malformed text is refused.
func TestJobIDText(t *testing.T) {
	t.Parallel()
	type row struct{ ID, Zero keys.JobID }
	id := keys.NewJobID()
	b, err := json.Marshal(row{ID: id})
	require.NoError(t, err)
	require.JSONEq(t, `{"ID":"`+id.String()+`","Zero":""}`, string(b))
	var back row
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, row{ID: id}, back)
	require.Error(t, json.Unmarshal([]byte(`{"ID":"JOB_nope"}`), &back))
}

// TestJobIDAt: a deterministic id carries its ms as its mint time, parses back, is the same for
// the same (ms, seed) and differs for another seed or another ms.
func TestJobIDAt(t *testing.T) {
	t.Parallel()
	const ms = 1772953200000 // 2026-03-08T07:00:00Z
	a := keys.JobIDAt(ms, []byte("orders\x00eod\x00"+"1772953200000"))
	require.False(t, a.IsZero())
	require.Equal(t, int64(ms), a.Time().UnixMilli())
	back, err := keys.ParseJobID(a.String())
	require.NoError(t, err)
	require.Equal(t, a, back)
	require.Equal(t, a, keys.JobIDAt(ms, []byte("orders\x00eod\x00"+"1772953200000")), "deterministic")
	require.NotEqual(t, a, keys.JobIDAt(ms, []byte("orders\x00eod2\x00"+"1772953200000")), "another seed")
	require.NotEqual(t, a.String()[14:], keys.JobIDAt(ms+1, []byte("x")).String()[14:], "the random part follows the seed")
	require.Equal(t, a.String()[:14], keys.JobIDFloor(time.UnixMilli(ms))[:14], "time characters of ms")
	// The random part is the first 80 bits of SHA-256(seed): for the empty seed, e3b0c44298fc1c149afb.
	require.Equal(t, "JOB_0000000000"+"WERC8GMRZGE196QV", keys.JobIDAt(0, nil).String())
	seen := map[keys.JobID]bool{}
	for i := range 10_000 {
		id := keys.JobIDAt(ms, []byte{byte(i), byte(i >> 8)})
		require.False(t, seen[id], "seed %d", i)
		seen[id] = true
	}
	require.Equal(t, int64(0), keys.JobIDAt(-5, nil).Time().UnixMilli(), "clamped to the epoch")
}
