package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/keys"
)

// listing is one page of emq ls.
type listing struct {
	Queue string     `json:"queue"`
	Set   string     `json:"set"`
	Jobs  []listedID `json:"jobs"`
	// Next is the cursor of the next page (--after), empty on the last page.
	Next string `json:"next,omitempty"`
}

// listedID is one job of a listing: its id and the mint time the id carries.
type listedID struct {
	ID     string    `json:"id"`
	Minted time.Time `json:"minted"`
}

// sets are the set names ls takes, and the grammar's types they name.
var sets = map[string]keys.Type{"pending": keys.Pending, "dead": keys.Dead}

func lsCmd(a *app) *cobra.Command {
	var (
		newest       bool
		since, until string
		after        string
		limit        int
	)
	c := &cobra.Command{
		Use:   "ls <queue> pending|dead",
		Short: "List the jobs of one of a queue's sets, a page at a time",
		Long: `List job ids of a queue's pending or dead set in mint order, oldest first (claim order for
pending) or with --newest newest first, with the mint time each id carries. --since and
--until bound the mint time (RFC 3339, or a duration meaning that long ago: 1h, 30m); no second
index is read. A page holds --limit ids (default 100); the next page starts --after the last
id printed.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			set, ok := sets[args[1]]
			if !ok {
				return usagef("set %q: ls lists %s", args[1], setNames())
			}
			opts := &bus.BrowseOpts{Set: set, Newest: newest, Limit: limit}
			var err error
			if opts.From, err = parseWhen("--since", since); err != nil {
				return err
			}
			if opts.To, err = parseWhen("--until", until); err != nil {
				return err
			}
			if after != "" {
				if opts.After, err = parseJobID(after); err != nil {
					return err
				}
			}
			if limit < 1 {
				return usagef("--limit: %d is not positive", limit)
			}
			if err := a.connect(); err != nil {
				return err
			}
			ctx, cancel := a.ctx()
			defer cancel()
			if err := a.requireQueue(ctx, args[0]); err != nil {
				return err
			}
			page, err := a.bus.Browse(ctx, args[0], opts)
			if err != nil {
				return err
			}
			l := listing{Queue: args[0], Set: args[1], Jobs: []listedID{}}
			for _, id := range page.IDs {
				l.Jobs = append(l.Jobs, listedID{ID: id.String(), Minted: id.Time()})
			}
			if !page.Next.IsZero() {
				l.Next = page.Next.String()
			}
			return a.emit(l, func() {
				t := [][]string{{"ID", "MINTED"}}
				for _, j := range l.Jobs {
					t = append(t, []string{j.ID, fmtTime(j.Minted)})
				}
				a.table(t)
				if l.Next != "" {
					fmt.Fprintf(a.out, "more: emq ls %s %s --after %s\n", l.Queue, l.Set, l.Next)
				}
			})
		},
	}
	f := c.Flags()
	f.BoolVar(&newest, "newest", false, "newest first")
	f.StringVar(&since, "since", "", "jobs minted at or after this time (RFC 3339, or a duration ago)")
	f.StringVar(&until, "until", "", "jobs minted before this time (RFC 3339, or a duration ago)")
	f.StringVar(&after, "after", "", "the page after this job id (the previous page's last)")
	f.IntVar(&limit, "limit", bus.DefaultLimit, "ids per page")
	return c
}

// setNames lists the set names ls takes.
func setNames() string {
	names := make([]string, 0, len(sets))
	for _, n := range []string{"pending", "active", "scheduled", "dead"} {
		if _, ok := sets[n]; ok {
			names = append(names, n)
		}
	}
	return strings.Join(names, ", ")
}

// parseWhen reads a time flag: empty (none), RFC 3339, or a duration meaning that long ago.
func parseWhen(flag, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return time.Now().Add(-d), nil
	}
	return time.Time{}, usagef("%s %q: not an RFC 3339 time nor a duration ago (1h, 30m)", flag, s)
}

// parseAt reads --at: an RFC 3339 time.
func parseAt(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, usagef("--at %q: not an RFC 3339 time", s)
	}
	return t, nil
}
