package main

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestJobsRan: the demo's drain counts, by id, the acknowledged jobs that ran; a job that ran
// but is not among them (a PUT whose reply was lost) does not count, nor does a second run,
// and more ids than one query takes are counted across queries.
func TestJobsRan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := openStore(ctx, filepath.Join(t.TempDir(), "catalog.db"), 10)
	require.NoError(t, err)
	defer s.Close()
	var acked []string
	for i := range 1200 {
		acked = append(acked, fmt.Sprintf("JOB_%04d", i))
	}
	for _, id := range []string{"JOB_0003", "JOB_0700", "JOB_1199", "JOB_0700", "JOB_unacked"} {
		require.NoError(t, s.Reindex(ctx, id, 1, 1, 1))
	}
	ran, err := s.JobsRan(ctx, acked)
	require.NoError(t, err)
	require.Equal(t, int64(3), ran)
	done, dup, _, err := s.JobsDone(ctx)
	require.NoError(t, err)
	require.Equal(t, [2]int64{4, 1}, [2]int64{done, dup}, "JobsDone counts every job, the unacknowledged one too")
}
