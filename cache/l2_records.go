package cache

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/valkey-io/valkey-go"
)

// The coherence records' commands and the write scripts (cache_set, cache_invalidate,
// cache_flush): the other half of the package's door to valkey-go (see l2.go).

// record is a coherence record as read.
type record struct {
	exists bool
	epoch  string
	seq    int64
	last   string           // the token of the write that made seq; "" from a record without one
	ring   [chainLen]string // the record's ring: ring[s mod 64] is "<s>:<token>" of the write that made s ("": absent)
}

// chainLen is how many tokens a record's ring keeps (FORMAT inval in lua/cache_set.lua).
const chainLen = 64

// tokenAt is the token of the write that made seq, if r's ring still reaches back to it.
func (r record) tokenAt(seq int64) (string, bool) {
	i := r.seq - seq
	if i < 0 || i >= chainLen {
		return "", false
	}
	f := r.ring[((seq%chainLen)+chainLen)%chainLen] // rounding down, as Lua's % does
	at, token, ok := strings.Cut(f, ":")
	if !ok || at != strconv.FormatInt(seq, 10) {
		return "", false // absent, or a later seq's (a write that did not write the ring)
	}
	return token, true
}

// recordFields are the fields of a coherence record a reconcile reads: epoch, seq, last and
// the ring r0 to r63 (FORMAT inval in lua/cache_set.lua).
var recordFields = func() []string {
	f := []string{"epoch", "seq", "last"}
	for k := range chainLen {
		f = append(f, "r"+strconv.Itoa(k))
	}
	return f
}()

// fetchRecords reads coherence records (HMGET of recordFields), pipelined in one round trip
// (valkey-go splits it per slot on a cluster).
func (c *Cache) fetchRecords(ctx context.Context, recordKeys []string) ([]record, error) {
	cmds := make(valkey.Commands, len(recordKeys))
	for i, k := range recordKeys {
		cmds[i] = c.client.B().Hmget().Key(k).Field(recordFields...).Build()
	}
	out := make([]record, len(recordKeys))
	for i, r := range c.client.DoMulti(ctx, cmds...) {
		arr, err := r.ToArray()
		if err != nil {
			return nil, l2err("HMGET", recordKeys[i], err)
		}
		if len(arr) != len(recordFields) {
			return nil, l2err("HMGET", recordKeys[i], fmt.Errorf("%d replies for %d fields", len(arr), len(recordFields)))
		}
		epoch, exists, err := stringReply(arr[0])
		if err != nil {
			return nil, l2err("HMGET", recordKeys[i], err)
		}
		if !exists {
			continue
		}
		out[i] = record{exists: true, epoch: epoch}
		if s, ok, err := stringReply(arr[1]); err == nil && ok {
			out[i].seq, _ = strconv.ParseInt(s, 10, 64)
		}
		if s, ok, err := stringReply(arr[2]); err == nil && ok {
			out[i].last = s[:min(len(s), tokenLen)]
		}
		for k := range chainLen {
			if s, ok, err := stringReply(arr[3+k]); err == nil && ok {
				out[i].ring[k] = s
			}
		}
	}
	return out, nil
}

// writeReply reads the {epoch, seq} reply of cache_set and cache_invalidate.
func writeReply(op, key string, r valkey.ValkeyResult) error {
	if err := r.Error(); err != nil {
		return l2err(op, key, err)
	}
	return nil
}

// setRow runs cache_set: write the row of id, bump the record, publish; token is the
// write's (the row's version too: one token per call). written is false
// when a versioned row was refused because L2 holds a higher version (the reply 0): nothing
// was written or published.
func (c *Cache) setRow(ctx context.Context, tk tableKeys, token, id, row string, px time.Duration) (written bool, err error) {
	r := scriptSet.Exec(ctx, c.client, []string{tk.recordKey, tk.channel},
		[]string{token, strconv.FormatInt(pxMillis(px), 10), id, row})
	if err := writeReply("cache_set", tk.recordKey, r); err != nil {
		return false, err
	}
	if n, err := r.AsInt64(); err == nil && n == 0 {
		return false, nil
	}
	return true, nil
}

// invalidateRows runs cache_invalidate for ids (at most invalidateBatch of them).
func (c *Cache) invalidateRows(ctx context.Context, tk tableKeys, ids []string) error {
	args := make([]string, 0, 1+len(ids))
	args = append(append(args, c.writeToken()), ids...)
	return writeReply("cache_invalidate", tk.recordKey, scriptInval.Exec(ctx, c.client, []string{tk.recordKey, tk.channel}, args))
}

// walkPos is where a cache_flush walk stands: the SCAN cursor, and the run_id of the server
// process it is a place in (a cursor means nothing to another process: cache_flush starts
// the walk again there). The zero walkPos is the start.
type walkPos struct{ cursor, server string }

// flushTable runs cache_flush from at until its walk ends: every row deleted, then a new
// epoch. On an error it returns where the walk had got, for another call to resume it.
func (c *Cache) flushTable(ctx context.Context, tk tableKeys, at walkPos) (walkPos, error) {
	token := c.writeToken()
	if at.cursor == "" {
		at.cursor = "0"
	}
	for {
		if c.hookFlushStep != nil {
			if err := c.hookFlushStep(); err != nil {
				return at, l2err("cache_flush", tk.recordKey, err)
			}
		}
		args := []string{token, at.cursor, strconv.Itoa(c.flushCount)}
		if at.server != "" {
			args = append(args, at.server)
		}
		arr, err := scriptFlush.Exec(ctx, c.client, []string{tk.recordKey, tk.channel}, args).ToArray()
		if err != nil {
			return at, l2err("cache_flush", tk.recordKey, err)
		}
		if len(arr) != 5 {
			return at, l2err("cache_flush", tk.recordKey, fmt.Errorf("%d replies, want 5", len(arr)))
		}
		next, err := arr[0].ToString()
		if err != nil {
			return at, l2err("cache_flush", tk.recordKey, err)
		}
		server, err := arr[4].ToString()
		if err != nil {
			return at, l2err("cache_flush", tk.recordKey, err)
		}
		if next == "0" {
			return walkPos{}, nil
		}
		at = walkPos{cursor: next, server: server}
	}
}

// tableKeys are a table's coherence keys: its record and its invalidation channel.
type tableKeys struct{ recordKey, channel string }
