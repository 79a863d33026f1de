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
	// NextAt is the rest of the cursor of active and scheduled (--after-at): the At of the
	// page's last job; absent on the last page and for pending and dead.
	NextAt *time.Time `json:"next_at,omitempty"`
	// InLanes and Urgent, present for pending alone, are the waiting jobs the list does not
	// hold (bus.Counts): those of priority 0 in the lanes' sets, and those of priority 1 to 3.
	// They count the whole queue, whatever --since and --until, read after the page.
	InLanes *int64 `json:"in_lanes,omitempty"`
	Urgent  *int64 `json:"urgent,omitempty"`
}

// listedID is one job of a listing: its id and the mint time the id carries; in active its
// lease deadline and the lease holder's token, in scheduled its run-at and claims so far.
type listedID struct {
	ID     string     `json:"id"`
	Minted time.Time  `json:"minted"`
	At     *time.Time `json:"at,omitempty"`
	Token  *int64     `json:"token,omitempty"`
}

// sets are the set names ls takes, and the grammar's types they name.
var sets = map[string]keys.Type{"pending": keys.Pending, "active": keys.Active, "scheduled": keys.Schedule, "dead": keys.Dead}

// byScore reports whether t is ordered by score (active, schedule) rather than mint order.
func byScore(t keys.Type) bool { return t == keys.Active || t == keys.Schedule }

func lsCmd(a *app) *cobra.Command {
	var (
		newest       bool
		since, until string
		after        string
		afterAt      string
		limit        int
	)
	c := &cobra.Command{
		Use:   "ls <queue> pending|active|scheduled|dead",
		Short: "List the jobs of one of a queue's sets, a page at a time",
		Long: `List job ids of a queue's pending or dead set in mint order, oldest first (claim order for
pending) or with --newest newest first, with the mint time each id carries. --since and
--until bound the mint time (RFC 3339, or a duration meaning that long ago: 1h, 30m); no second
index is read. A page holds --limit ids (default 100, at most 10,000); the next page starts
--after the last id printed.

active lists the claimed jobs by lease deadline (the next lease to run out first) with the
lease holder's token; scheduled lists the delayed jobs by run-at (the next due first) with
their claims so far. Both are read in one atomic snapshot; a page holds at most 1000 jobs, and
the next page starts --after the last id --after-at its time (the "more:" line prints both).
--since and --until do not apply to them: they are ordered by time in the set, not by mint
time.

pending holds the jobs without a lane. The jobs waiting in lanes and those of priority 1 to
3 wait in sets of their own: when there are any, a line after the list says how many (the
whole queue's, whatever --since and --until), and --json gives them as in_lanes and urgent;
emq lanes lists the lanes.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			set, ok := sets[args[1]]
			if !ok {
				return usagef("set %q: ls lists %s", args[1], setNames())
			}
			opts := &bus.BrowseOpts{Set: set, Newest: newest, Limit: limit}
			var err error
			if err := cursorFlags(args[1], set, since, until, after, afterAt); err != nil {
				return err
			}
			if afterAt != "" {
				if opts.AfterAt, err = time.Parse(time.RFC3339Nano, afterAt); err != nil {
					return usagef("--after-at %q: not an RFC 3339 time", afterAt)
				}
			}
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
			ctx, cancel, err := a.openQueue(args[0])
			if err != nil {
				return err
			}
			defer cancel()
			page, err := a.bus.Browse(ctx, args[0], opts)
			if err != nil {
				return err
			}
			l := listing{Queue: args[0], Set: args[1], Jobs: []listedID{}}
			for _, e := range page.Entries {
				j := listedID{ID: e.ID.String(), Minted: e.ID.Time()}
				if byScore(set) {
					at, token := e.At, e.Token
					j.At, j.Token = &at, &token
				}
				l.Jobs = append(l.Jobs, j)
			}
			if !page.Next.IsZero() {
				l.Next = page.Next.String()
			}
			if !page.NextAt.IsZero() {
				at := page.NextAt
				l.NextAt = &at
			}
			if set == keys.Pending {
				// The page is only the queue's own set: say what waits elsewhere, or a queue
				// whose work is all in lanes reads as empty.
				c, err := a.bus.Counts(ctx, args[0])
				if err != nil {
					return err
				}
				l.InLanes, l.Urgent = &c.InLanes, &c.Urgent
			}
			return a.emit(l, func() { a.printListing(l, set, opts) })
		},
	}
	f := c.Flags()
	f.BoolVar(&newest, "newest", false, "newest first")
	f.StringVar(&since, "since", "", "jobs minted at or after this time (RFC 3339, or a duration ago)")
	f.StringVar(&until, "until", "", "jobs minted before this time (RFC 3339, or a duration ago)")
	f.StringVar(&after, "after", "", "the page after this job id (the previous page's last)")
	f.StringVar(&afterAt, "after-at", "", "active and scheduled: the time of the --after job (the previous page's last, RFC 3339)")
	f.IntVar(&limit, "limit", bus.DefaultLimit, "ids per page")
	return c
}

// cursorFlags refuses the flags that do not apply to the set named name: the mint-time
// range for active and scheduled, --after-at for pending and dead, --after-at without
// --after and the reverse for active and scheduled.
func cursorFlags(name string, set keys.Type, since, until, after, afterAt string) error {
	switch {
	case byScore(set) && (since != "" || until != ""):
		return usagef("--since/--until bound the mint time of pending and dead; %s is ordered by its jobs' times (page it with --after and --after-at)", name)
	case !byScore(set) && afterAt != "":
		return usagef("--after-at is the cursor of active and scheduled; %s pages by --after alone", name)
	case byScore(set) && (after == "") != (afterAt == ""):
		return usagef("the cursor of %s is --after and --after-at together (both printed by the previous page)", name)
	}
	return nil
}

// printListing renders l as a table, the time column named for the set, for pending a line
// on the jobs waiting in lanes and at a priority when there are any, and the command of the
// next page: --newest and the mint-time range kept (as the times it was read as, so
// that a duration ago does not move).
func (a *app) printListing(l listing, set keys.Type, opts *bus.BrowseOpts) {
	head := []string{"ID", "MINTED"}
	switch set {
	case keys.Active:
		head = append(head, "LEASE UNTIL", "TOKEN")
	case keys.Schedule:
		head = append(head, "RUN AT", "ATTEMPTS")
	}
	t := [][]string{head}
	for _, j := range l.Jobs {
		row := []string{j.ID, fmtTime(j.Minted)}
		if j.At != nil {
			row = append(row, fmtTime(*j.At), itoa(*j.Token))
		}
		t = append(t, row)
	}
	a.table(t)
	if l.InLanes != nil && l.Urgent != nil && (*l.InLanes != 0 || *l.Urgent != 0) {
		fmt.Fprintf(a.out, "this list holds the jobs without a lane; %d more wait in lanes and %d at a priority (see emq lanes %s)\n",
			*l.InLanes, *l.Urgent, l.Queue)
	}
	if l.Next == "" {
		return
	}
	more := fmt.Sprintf("more: emq ls %s %s", l.Queue, l.Set)
	if opts.Newest {
		more += " --newest"
	}
	if !opts.From.IsZero() {
		more += " --since " + fmtTime(opts.From)
	}
	if !opts.To.IsZero() {
		more += " --until " + fmtTime(opts.To)
	}
	if opts.Limit != 0 && opts.Limit != bus.DefaultLimit {
		more += fmt.Sprintf(" --limit %d", opts.Limit)
	}
	more += " --after " + l.Next
	if l.NextAt != nil {
		more += " --after-at " + fmtTime(*l.NextAt)
	}
	fmt.Fprintln(a.out, more)
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
