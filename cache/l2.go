package cache

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/echocache/echocache/lua"
)

// This file and l2_records.go are the package's one door to valkey-go: every command the
// cache sends and every translation of a client error lives in them, so no other file needs
// valkey.IsValkeyNil. This one has the rows' commands; l2_records.go the coherence
// records' and the write scripts'; l2_errors.go how their errors read.

// Scripts of the bundle the cache runs.
var (
	scriptFill    = lua.Get("cache_fill")
	scriptRefresh = lua.Get("cache_refresh")
	scriptReclaim = lua.Get("cache_reclaim")
	scriptSet     = lua.Get("cache_set")
	scriptInval   = lua.Get("cache_invalidate")
	scriptFlush   = lua.Get("cache_flush")
)

// pttl is a row's remaining lifetime as PTTL reports it.
type pttl int64

const (
	pttlNoExpiry pttl = -1 // the row exists without a TTL (not written by EchoCache)
	pttlGone     pttl = -2 // the row vanished between GET and PTTL
	pttlUnread   pttl = -3 // not asked for: nothing needs it (no L1, no early refresh)
)

// stringResult reads a bulk-string reply; exists is false for a nil reply. It is the one
// place that tells valkey-go's nil reply from an error.
func stringResult(r valkey.ValkeyResult) (s string, exists bool, err error) {
	s, err = r.ToString()
	switch {
	case valkey.IsValkeyNil(err):
		return "", false, nil
	case err != nil:
		return "", false, err
	}
	return s, true, nil
}

// stringReply is stringResult for an element of an array reply.
func stringReply(m valkey.ValkeyMessage) (s string, exists bool, err error) {
	if m.IsNil() {
		return "", false, nil
	}
	s, err = m.ToString()
	return s, err == nil, err
}

// readRow reads a row and, when withTTL is set, its remaining TTL in the same round trip:
// GET and PTTL pipelined on one connection. Two plain commands cost the server less than a
// script that reads both, and cost the client about what a bare GET does, since they share
// one round trip (BenchmarkL2Read compares the three; the bench report holds its figures). A
// table without L1 needs no TTL for most reads and sends the bare GET.
func (c *Cache) readRow(ctx context.Context, key string, withTTL bool) (val string, exists bool, ttl pttl, err error) {
	if !withTTL {
		val, exists, err = stringResult(c.client.Do(ctx, c.client.B().Get().Key(key).Build()))
		if err != nil {
			return "", false, 0, l2err("GET", key, err)
		}
		return val, exists, pttlUnread, nil
	}
	res := c.client.DoMulti(ctx,
		c.client.B().Get().Key(key).Build(),
		c.client.B().Pttl().Key(key).Build())
	if val, exists, err = stringResult(res[0]); err != nil {
		return "", false, 0, l2err("GET", key, err)
	}
	n, err := res[1].AsInt64()
	if err != nil {
		return "", false, 0, l2err("PTTL", key, err)
	}
	return val, exists, pttl(n), nil
}

// readOrLease is a miss path's read of a row: SET key lease NX GET PX ttl (with the row's
// PTTL pipelined behind when withTTL is set, one round trip): where a row is, nothing is
// written and the reply is the row, as a GET would read it; where none is, the fill lease is
// written at once and acquired is set, so a cold miss takes its lease in the same round trip
// as its read.
//
// SET NX GET is a write, so valkey-go does not retry it over a broken connection as it
// retries a GET, and the first send may have landed: it is sent once more, with the same
// lease, and a reply that is this very lease says the first one took it.
func (c *Cache) readOrLease(ctx context.Context, key, lease string, ttl time.Duration, withTTL bool) (val string, exists, acquired bool, rowTTL pttl, err error) {
	val, exists, acquired, rowTTL, err = c.readOrLeaseOnce(ctx, key, lease, ttl, withTTL)
	var reply *valkey.ValkeyError
	switch {
	case err == nil || ctx.Err() != nil:
		return val, exists, acquired, rowTTL, err
	case errors.As(err, &reply):
		// A server that refuses writes (out of memory under noeviction, a read-only replica,
		// too few replicas) still serves reads: read the row with GET, as before leases were
		// taken by reads. A fill that follows fails to take its lease and says so.
		val, exists, rowTTL, err = c.readRow(ctx, key, withTTL)
		return val, exists, false, rowTTL, err
	}
	val, exists, acquired, rowTTL, err = c.readOrLeaseOnce(ctx, key, lease, ttl, withTTL)
	if err == nil && exists && val == lease {
		return "", false, true, rowTTL, nil
	}
	return val, exists, acquired, rowTTL, err
}

func (c *Cache) readOrLeaseOnce(ctx context.Context, key, lease string, ttl time.Duration, withTTL bool) (val string, exists, acquired bool, rowTTL pttl, err error) {
	set := c.leaseCmd(key, lease, ttl)
	if !withTTL {
		acquired, val, err = leaseReply(key, c.client.Do(ctx, set))
		return val, !acquired && err == nil, acquired, pttlUnread, err
	}
	res := c.client.DoMulti(ctx, set, c.client.B().Pttl().Key(key).Build())
	if acquired, val, err = leaseReply(key, res[0]); err != nil {
		return "", false, false, 0, err
	}
	n, err := res[1].AsInt64()
	if err != nil {
		return "", false, false, 0, l2err("PTTL", key, err)
	}
	return val, !acquired, acquired, pttl(n), nil
}

// readPTTL reads a row's remaining TTL.
func (c *Cache) readPTTL(ctx context.Context, key string) (pttl, error) {
	n, err := c.client.Do(ctx, c.client.B().Pttl().Key(key).Build()).AsInt64()
	if err != nil {
		return 0, l2err("PTTL", key, err)
	}
	return pttl(n), nil
}

// rowRead is one row of a batch read.
type rowRead struct {
	val    string
	exists bool
	ttl    pttl
}

// readRows reads many rows of one table with one MGET per shard (groups holds each shard's
// indexes into keys; nil means one MGET of all), their PTTLs (when withTTL is set) pipelined
// behind: one round trip, which valkey-go splits per node on a cluster. All rows of a shard
// share a hash slot, so each MGET is single-slot. On a cluster each row gets an MGET of its
// own: while its slot migrates, a node refuses a command of several keys when some of them
// are not there (TRYAGAIN, which the client retries until the read's deadline, for as long as
// the migration lasts), where it redirects a command of one key (ASK) to wherever it is.
func (c *Cache) readRows(ctx context.Context, keys []string, groups [][]int, withTTL bool) ([]rowRead, error) {
	if c.cluster && len(keys) > 1 {
		groups = make([][]int, len(keys))
		for i := range keys {
			groups[i] = []int{i}
		}
	}
	cmds := make(valkey.Commands, 0, len(groups)+1+len(keys))
	var mgets [][]int // the indexes each MGET read, in reply order; nil: all of them
	if groups == nil {
		cmds = append(cmds, c.client.B().Mget().Key(keys...).Build())
	} else {
		for _, g := range groups {
			if len(g) == 0 {
				continue
			}
			ks := make([]string, len(g))
			for j, i := range g {
				ks[j] = keys[i]
			}
			cmds = append(cmds, c.client.B().Mget().Key(ks...).Build())
			mgets = append(mgets, g)
		}
	}
	nm := len(cmds)
	if withTTL {
		for _, k := range keys {
			cmds = append(cmds, c.client.B().Pttl().Key(k).Build())
		}
	}
	res := c.client.DoMulti(ctx, cmds...)
	out := make([]rowRead, len(keys))
	for m := range nm {
		arr, err := res[m].ToArray()
		idx := func(j int) int { return j }
		want := len(keys)
		if mgets != nil {
			g := mgets[m]
			idx, want = func(j int) int { return g[j] }, len(g)
		}
		if err != nil {
			return nil, l2err("MGET", keys[idx(0)], err)
		}
		if len(arr) != want {
			return nil, l2err("MGET", keys[idx(0)], fmt.Errorf("%d replies for %d keys", len(arr), want))
		}
		for j := range arr {
			i := idx(j)
			if out[i].val, out[i].exists, err = stringReply(arr[j]); err != nil {
				return nil, l2err("MGET", keys[i], err)
			}
		}
	}
	for i := range keys {
		if !withTTL {
			out[i].ttl = pttlUnread
			continue
		}
		n, err := res[nm+i].AsInt64()
		if err != nil {
			return nil, l2err("PTTL", keys[i], err)
		}
		out[i].ttl = pttl(n)
	}
	return out, nil
}

// leaseCmd is SET key lease NX GET PX ms: it writes the fill lease only where no row is,
// and answers the row that blocked it, in one command.
func (c *Cache) leaseCmd(key, lease string, ttl time.Duration) valkey.Completed {
	return c.client.B().Set().Key(key).Value(lease).Nx().Get().PxMilliseconds(pxMillis(ttl)).Build()
}

// leaseReply reads a leaseCmd reply: acquired, or the row that was there.
func leaseReply(key string, r valkey.ValkeyResult) (acquired bool, cur string, err error) {
	cur, exists, err := stringResult(r)
	if err != nil {
		return false, "", l2err("SET NX", key, err)
	}
	return !exists, cur, nil
}

// tryLease writes a fill lease on an absent row; when a row was there, cur is that row.
func (c *Cache) tryLease(ctx context.Context, key, token string, ttl time.Duration) (acquired bool, cur string, err error) {
	return leaseReply(key, c.client.Do(ctx, c.leaseCmd(key, leaseRow(token), ttl)))
}

// reclaim replaces the unreadable row cur with a fill lease, if the row is still cur.
func (c *Cache) reclaim(ctx context.Context, key, cur, token string, ttl time.Duration) (bool, error) {
	sum := sha1.Sum([]byte(cur))
	n, err := scriptReclaim.Exec(ctx, c.client, []string{key},
		[]string{hex.EncodeToString(sum[:]), token, strconv.FormatInt(pxMillis(ttl), 10)}).AsInt64()
	if err != nil {
		return false, l2err("cache_reclaim", key, err)
	}
	return n == 1, nil
}

// claimRefresh claims the value row of the given version for an early refresh.
func (c *Cache) claimRefresh(ctx context.Context, key, token, version string) (bool, error) {
	n, err := scriptRefresh.Exec(ctx, c.client, []string{key}, []string{token, version}).AsInt64()
	if err != nil {
		return false, l2err("cache_refresh", key, err)
	}
	return n == 1, nil
}

// fillArgs are cache_fill's arguments; an empty row releases the lease.
func fillArgs(token, row string, px time.Duration) []string {
	return []string{token, row, strconv.FormatInt(pxMillis(px), 10)}
}

// finishFill writes row over the caller's lease (or releases it when row is empty).
// written is false when the row no longer holds the caller's token.
func (c *Cache) finishFill(ctx context.Context, key, token, row string, px time.Duration) (written bool, err error) {
	n, err := scriptFill.Exec(ctx, c.client, []string{key}, fillArgs(token, row, px)).AsInt64()
	if err != nil {
		return false, l2err("cache_fill", key, err)
	}
	return n == 1, nil
}

// pxMillis is d as the whole milliseconds of a PX argument: rounded down, so a row or lease
// never lives longer than asked, and at least 1, because PX refuses 0. A fill's L1 deadline
// is counted from the same figure, so it cannot outlive the row it copies. (bus rounds its
// durations up instead: a job lease must not be cut short.)
func pxMillis(d time.Duration) int64 {
	if n := d.Milliseconds(); n > 0 {
		return n
	}
	return 1
}

// leaseMany writes the fill lease on every key that has no row, in one pipeline of SET NX
// GET PX; acquired[i] tells which it got.
func (c *Cache) leaseMany(ctx context.Context, keys []string, token string, ttl time.Duration) (acquired []bool, err error) {
	lease := leaseRow(token)
	cmds := make(valkey.Commands, len(keys))
	for i, k := range keys {
		cmds[i] = c.leaseCmd(k, lease, ttl)
	}
	acquired = make([]bool, len(keys))
	var errs []error
	for i, r := range c.client.DoMulti(ctx, cmds...) {
		ok, _, err := leaseReply(keys[i], r)
		if err != nil {
			errs = append(errs, err)
		}
		acquired[i] = ok
	}
	return acquired, errors.Join(errs...)
}

// finishMany runs cache_fill for every key, pipelined in one round trip; written[i] tells
// which rows landed. A key whose call failed reports its error in errs[i].
func (c *Cache) finishMany(ctx context.Context, keys []string, token string, rows []string, pxs []time.Duration) (written []bool, errs []error) {
	runs := make([]lua.Run, len(keys))
	for i, k := range keys {
		runs[i] = lua.Run{Script: scriptFill, Keys: []string{k}, Args: fillArgs(token, rows[i], pxs[i])}
	}
	written, errs = make([]bool, len(keys)), make([]error, len(keys))
	replies, _ := lua.Pipeline(ctx, c.client, runs, nil)
	for i, r := range replies {
		n, err := r.AsInt64()
		if err != nil {
			errs[i] = l2err("cache_fill", keys[i], err)
			continue
		}
		written[i] = n == 1
	}
	return written, errs
}
