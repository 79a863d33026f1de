package main

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLsMoreKeepsRange: the "more:" line of a page bounded by --until (or --since) is the
// next page of the same listing: it keeps the range, so following it lists no job past it.
func TestLsMoreKeepsRange(t *testing.T) {
	t.Parallel()
	srv, b, queue := sharedQueue(t)
	ids := enqueueApart(t, b, queue, 6)
	// The range holds the first four jobs (until is the fifth's mint millisecond, excluded);
	// pages of two.
	until := fmtTime(ids[4].Time())
	since := fmtTime(ids[1].Time())

	follow := func(args ...string) [][]string {
		var pages [][]string
		for len(pages) < 10 {
			var page []string
			var more string
			for _, l := range lines(ok(t, srv.Addr, args...)) {
				switch {
				case strings.HasPrefix(l, "JOB_"):
					page = append(page, strings.Fields(l)[0])
				case strings.HasPrefix(l, "more: emq "):
					more = strings.TrimPrefix(l, "more: emq ")
				}
			}
			pages = append(pages, page)
			if more == "" {
				return pages
			}
			args = strings.Fields(more)
		}
		t.Fatalf("emq ls %v: more than 10 pages", args)
		return nil
	}
	want := func(from, to int) []string {
		var out []string
		for _, id := range ids[from:to] {
			out = append(out, id.String())
		}
		return out
	}
	require.Equal(t, [][]string{want(0, 2), want(2, 4)}, follow("ls", queue, "pending", "--until", until, "--limit", "2"))
	require.Equal(t, [][]string{{ids[3].String(), ids[2].String()}, {ids[1].String()}},
		follow("ls", queue, "pending", "--newest", "--since", since, "--until", until, "--limit", "2"))
}

// TestLsMoreKeepsLimit: the "more:" line of a page of --limit N asks for the next N, not for
// the default 100.
func TestLsMoreKeepsLimit(t *testing.T) {
	t.Parallel()
	srv, b, queue := sharedQueue(t)
	for range 5 {
		_, err := b.Enqueue(context.Background(), queue, []byte("x"), nil)
		require.NoError(t, err)
	}
	out := ok(t, srv.Addr, "ls", queue, "pending", "--limit", "2")
	require.Contains(t, out, "more: emq ls "+queue+" pending --limit 2 --after ")
	out = ok(t, srv.Addr, "ls", queue, "pending", "--limit", "100")
	require.NotContains(t, out, "more:")
}
