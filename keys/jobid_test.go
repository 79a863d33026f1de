package keys_test

import (
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
}
