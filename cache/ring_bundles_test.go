package cache_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/echocache/echocache/cache"
	"github.com/echocache/echocache/internal/valkeytest"
	"github.com/echocache/echocache/keys"
	"github.com/echocache/echocache/tables"
)

// TestRingMixedBundles: during a rolling upgrade a process still on the previous bundle
// (whose cache_invalidate kept a 1 KB chain of tokens in last and wrote no ring field) writes
// the table at seq 65, where ring field r1 still names seq 1, written by a new process. A new
// reader that saw (65, the old process's token) and then reads the record past it (a lost
// message here; a message in flight at a reconcile does the same) finds that r1 names another
// seq, which tells nothing: not a regression, no whole-table invalidation. The control writes
// seq 65 with the new bundle.
func TestRingMixedBundles(t *testing.T) {
	t.Run("control-new-bundle", func(t *testing.T) { mixedRing(t, "") })
	t.Run("old-bundle-writer", func(t *testing.T) { mixedRing(t, oldCacheInvalidate) })
}

func mixedRing(t *testing.T, old string) {
	t.Parallel()
	var err error
	ctx := context.Background()
	srv := valkeytest.Start(t, valkeytest.WithoutPersistence())
	client := srv.Client(t)
	name := tableName(t)
	spec := tables.Spec{Name: name, L2Timeout: relaxedL2}

	writer, err := cache.New(client, cache.Config{ReconcileInterval: time.Hour})
	require.NoError(t, err)
	t.Cleanup(writer.Close)
	wt := newTable(t, writer, spec, &source{})

	reader, err := cache.New(srv.Client(t), cache.Config{ReconcileInterval: 300 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(reader.Close)
	reader.SetHookMessage(func(_ string, p []byte) bool {
		return strings.Split(string(p), "\n")[1] != "66" // the message of seq 66 is lost
	})
	rt := newTable(t, reader, spec, &source{})
	valkeytest.Eventually(t, 10*time.Second, "synced", func() bool { return wt.Synced() && rt.Synced() })

	for i := 1; i <= 64; i++ { // seq 1..64, by the new bundle: r0..r63 written
		require.NoError(t, wt.Set(ctx, strconv.Itoa(i), user{Name: "v"}))
	}
	kt := keys.MustTable(name)
	// seq 65 by a process on the previous bundle (its cache_invalidate, as it was)
	if old != "" {
		require.NoError(t, client.Do(ctx, client.B().Eval().Script(old).Numkeys(2).
			Key(kt.Record(), kt.Inval()).Arg("OLDPROCESStoken1", "1").Build()).Error())
	} else {
		require.NoError(t, wt.Invalidate(ctx, "1"))
	}
	valkeytest.Eventually(t, 10*time.Second, "the reader to apply seq 65", func() bool {
		return rt.Stats().InvalidationsReceived >= 65
	})
	require.NoError(t, wt.Set(ctx, "2", user{Name: "w"})) // seq 66, its message lost at the reader
	time.Sleep(2 * time.Second)                           // a few reconciles
	st := rt.Stats()
	left, err := client.Do(ctx, client.B().Scan().Cursor(0).Match(rowKey(t, wt, "*")).Count(100000).Build()).AsScanEntry()
	require.NoError(t, err)
	t.Logf("reader: regressions %d, flushes %d, gaps %d; rows left in L2: %d of 63", st.Regressions, st.Flushes, st.Gaps, len(left.Elements))
	require.Zero(t, st.Regressions, "nothing went back in time")
	require.NotEmpty(t, left.Elements, "no whole-table invalidation was owed")
}

// oldCacheInvalidate is lua/cache_invalidate.lua as of 1abc802, before the ring.
const oldCacheInvalidate = `-- cache_invalidate: delete rows, bump the table's sequence, publish the invalidation.
--
-- One sequence number and one message for the whole call, naming every id in call order.
-- Deleting a row also deletes a fill lease on it, so a fill that began before this call
-- cannot write the value it loaded.
--
-- KEYS[1]  ecc:{<table>}           the coherence record (FORMAT inval), or a shard's
--          ecc:{<table>#<shard>} for a table spread over shards (FORMAT shards)
-- KEYS[2]  emq:{<table>}:inval     the table's invalidation channel (FORMAT inval), or the
--          shard's emq:{<table>#<shard>}:inval, of the same tag as KEYS[1]
-- ARGV[1]  token  token  unique per call: names a new epoch if the record is missing, and
--          goes in front of the record's last (FORMAT inval)
-- ARGV[2]  id*    id     a starred ARGV repeats: one row id per row, one at least and 1000 at
--          most (an id may repeat). The Go cache sends at most 256 per call
-- DERIVES  ecc:{<table>}:<id>      each row: KEYS[1] .. ":" .. id
-- FORMAT   inval    see cache_set.lua
-- FORMAT   shards   see cache_set.lua
-- REPLY    {epoch, seq}: the record after the bump (a string and an integer)
-- ERROR    ECCKEYS    the KEYS are not one table's (or one shard's) record and channel
-- ERROR    ECCARG     an ARGV does not meet its rule, or no id or more than 1000 are given
-- ERROR    ECCTYPE    the record holds another type than hash, or a seq that is not an integer
local tag = string.match(KEYS[1] or '', '^ecc:{([0-9A-Za-z_.%-]+#?%d*)}$')
local name, shard = string.match(tag or '', '^([^#]*)(.*)$')
if #KEYS ~= 2 or not tag or #name > 64 or shard ~= '' and not (shard == '#0' or string.match(shard, '^#[1-9]%d?%d?$') and tonumber(string.sub(shard, 2)) < 256) or KEYS[2] ~= 'emq:{' .. tag .. '}:inval' then
  return redis.error_reply('ECCKEYS expected ecc:{<table>} and emq:{<table>}:inval of one table, or ecc:{<table>#<shard>} and emq:{<table>#<shard>}:inval of one shard')
end
local token = ARGV[1] or ''
if #token ~= 16 or string.find(token, '[^0-9A-Za-z]') then
  return redis.error_reply('ECCARG token must be 16 bytes of [0-9A-Za-z]')
end
if #ARGV < 2 or #ARGV > 1001 then return redis.error_reply('ECCARG expected 1 to 1000 ids') end
for i = 2, #ARGV do
  local id = ARGV[i]
  if id == '' or #id > 512 or string.find(id, '[%z\1-\31\127]') then
    return redis.error_reply('ECCARG ARGV[' .. i .. '] must be 1 to 512 bytes without control bytes')
  end
end
-- One read of the record answers both its type and its fields: a record of another type
-- fails the HMGET, and only then is TYPE asked, for the error's text.
local rec = redis.pcall('HMGET', KEYS[1], 'epoch', 'last', 'seq')
if rec['err'] then
  return redis.error_reply('ECCTYPE ' .. KEYS[1] .. ' holds a ' .. redis.call('TYPE', KEYS[1])['ok'] .. ', not a hash')
end
-- seq is what HINCRBY bumps after the first write: one it cannot bump refuses the call here.
if rec[3] and not (rec[3] == '0' or #rec[3] <= 18 and string.match(rec[3], '^%-?[1-9][0-9]*$')) then
  return redis.error_reply('ECCTYPE ' .. KEYS[1] .. ' holds a seq that is not an integer')
end
local now = redis.call('TIME')
local us = now[1] .. string.format('%06d', tonumber(now[2]))
local epoch, chain = rec[1], rec[2] or ''
local prev = string.sub(chain, 1, 16)
local made = not epoch
if made then epoch = us .. '.' .. token end
local msg = {epoch, '', us, prev, token}
for i = 2, #ARGV do
  redis.call('DEL', KEYS[1] .. ':' .. ARGV[i])
  msg[i + 4] = ARGV[i]
end
local seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
-- last keeps the tokens of the record's last 64 calls, newest first (FORMAT inval)
if made then
  redis.call('HSET', KEYS[1], 'epoch', epoch, 'last', token)
else
  redis.call('HSET', KEYS[1], 'last', token .. string.sub(chain, 1, 1008))
end
msg[2] = tostring(seq)
redis.call('SPUBLISH', KEYS[2], table.concat(msg, '\n'))
return {epoch, seq}
`
