package main

import (
	"context"
	"errors"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/keys"
)

// deadIDs reads the ids of every job of queue that is dead now, oldest first, a page at a
// time: what retry --all and purge --all confirm and then act on, so that a job that dies
// while the prompt waits is not taken in place of one the operator confirmed.
func (a *app) deadIDs(ctx context.Context, queue string) ([]keys.JobID, error) {
	var ids []keys.JobID
	var after keys.JobID
	for {
		page, err := a.bus.Browse(ctx, queue, &bus.BrowseOpts{Set: keys.Dead, After: after, Limit: bus.MaxBrowseLimit})
		if err != nil {
			return nil, err
		}
		ids = append(ids, page.IDs...)
		if page.Next.IsZero() {
			return ids, nil
		}
		after = page.Next
	}
}

// eachDead applies act (retry or purge, all or nothing per call) to ids, a page at a time,
// and returns how many it took. A page refused because one of its jobs is no longer dead
// (retried or purged by someone else meanwhile) is taken job by job, skipping those.
func (a *app) eachDead(ctx context.Context, ids []keys.JobID, act func(context.Context, []keys.JobID) (int, error)) (int, error) {
	total := 0
	for len(ids) > 0 {
		page := ids[:min(len(ids), bus.DefaultLimit)]
		ids = ids[len(page):]
		n, err := act(ctx, page)
		if gone(err) {
			n, err = 0, nil
			for _, id := range page {
				m, err := act(ctx, []keys.JobID{id})
				if err != nil && !gone(err) {
					return total + n, err
				}
				n += m
			}
		}
		if err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}

// gone reports whether err says a job is not dead any more (or not there at all).
func gone(err error) bool {
	return errors.Is(err, bus.ErrState) || errors.Is(err, bus.ErrNotFound)
}
