package dash_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/dash"
	"github.com/echocache/echocache/internal/valkeytest"
)

// TestRetryAllBounded: "Retry all dead" retries the jobs dead when it starts, each once: jobs
// a fast-failing worker sends back to dead meanwhile are not retried again in a loop (which
// spends their attempts and reports more retries than there were dead jobs), as emq retry
// --all guards against.
func TestRetryAllBounded(t *testing.T) {
	t.Parallel()
	s := setup(t, valkeytest.Shared(t).Client(t), dash.Config{})
	ctx := context.Background()
	q := name(t, "")
	const dead = 600
	for range dead {
		deadJob(t, s.bus, q, []byte("poison"))
	}
	tok := s.token("/queues/" + q)

	// A worker that fails every job it claims straight back to dead.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			jobs, err := s.bus.Claim(ctx, q, &bus.ClaimOpts{Count: 10})
			if err != nil || len(jobs) == 0 {
				time.Sleep(time.Millisecond)
				continue
			}
			for _, j := range jobs {
				s.bus.Fail(ctx, j, &bus.FailOpts{MaxAttempts: 1, Error: "still broken"})
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()

	resp, body := s.post("/queues/"+q+"/retry", url.Values{"csrf": {tok}, "all": {"1"}, "confirm": {"yes"}}, sameOrigin)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, body)
	loc, err := url.Parse(resp.Header.Get("Location"))
	require.NoError(t, err)
	done := loc.Query().Get("done")
	require.True(t, strings.HasPrefix(done, "retried "), done)
	n, err := strconv.Atoi(strings.Fields(done)[1])
	require.NoError(t, err, done)
	require.LessOrEqual(t, n, dead, "retry all said %q: more retries than the %d jobs dead when it started", done, dead)
}
