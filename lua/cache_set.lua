-- cache_set: write-through: write one row, bump the table's sequence, publish the invalidation.
--
-- The row is written over whatever is there: a fill lease loses its token, so the filler's
-- cache_fill is refused and the value it loaded before this write never lands. The message
-- names the one id and is published on the table's channel from the same slot, so every
-- subscriber sees the sequence in order. The row key is derived from KEYS[1]: the record's
-- key, ":", the id.
--
-- Versioned writes: a versioned value row (kind W, FORMAT row) carries the value's version, a
-- number the table reads from the value (a revision, an updated_at). When the new row is
-- versioned and the row it would replace is a versioned value (W, or S: claimed for a
-- refresh) of a higher version, the write is refused: nothing is written, bumped or
-- published. The newer value is already in L2, and the call that wrote it bumped the record
-- and published its invalidation, so no process is left holding what the refused write would
-- have replaced; the caller drops its own copy. An equal version is written (an idempotent
-- retry, or a fill and a write of the same revision): it bumps and publishes as usual. An
-- unversioned new row (kind V), or a versioned one over a row without a version (V, R, a fill
-- lease, a not-found row, anything else), is written over whatever is there, as before.
--
-- KEYS[1]  ecc:{<table>}           the coherence record (FORMAT inval), or a shard's
--          ecc:{<table>#<shard>} for a table spread over shards (FORMAT shards)
-- KEYS[2]  emq:{<table>}:inval     the table's invalidation channel (FORMAT inval), or the
--          shard's emq:{<table>#<shard>}:inval, of the same tag as KEYS[1]
-- ARGV[1]  token  token     unique per call: names a new epoch if the record is missing, and
--          becomes the record's last and its ring entry (FORMAT inval)
-- ARGV[2]  px     uint[1,999999999999999]  the row's TTL in ms. The Go cache passes the
--          table's TTL minus its jitter
-- ARGV[3]  id     id        the row id
-- ARGV[4]  row    valuerow  the new row: a value row, versioned (W) or not (V) (FORMAT row)
-- DERIVES  ecc:{<table>}:<id>      the row: KEYS[1] .. ":" .. id
-- FORMAT   row      see cache_fill.lua
-- FORMAT   inval    a table's coherence record ecc:{<table>} is a hash of epoch, seq, last
--          and a ring of 64 fields r0 to r63. epoch is "<server TIME in microseconds>.<token>"
--          (16 digits, ".", the 16 bytes of the token of the call that made it), made when the
--          record is missing, so a record lost to FLUSHALL or to a restart without persistence
--          comes back as a new epoch; cache_flush replaces it. seq grows by one per
--          invalidation (HINCRBY). Each call passes a token of its own (16 bytes); the call
--          that makes seq s writes its token to last, and "<s>:<token>" (s in decimal) to the
--          ring field "r" .. (s mod 64) (k in decimal, mod rounding down as Lua's % does: -1
--          mod 64 is 63): last is the token of the call that made seq, and r<k> names the
--          latest call whose seq is k mod 64, with its seq, so a reader that saw (s, t) and
--          reads the record at seq r, r - s < 64, finds at r<s mod 64> whether the record's
--          history still passes through its point; a field that names another seq (a call
--          that did not write the ring, such as one of an older bundle) tells nothing. A
--          reader takes only last's first 16 bytes (an older bundle kept a chain of tokens
--          after it). seq is written and published in decimal, exact up to 2^53.
--          Each call of cache_set, cache_invalidate and cache_flush publishes one message with
--          SPUBLISH on the table's shard channel emq:{<table>}:inval (subscribe with
--          SSUBSCRIBE): fields joined by "\n": the epoch, seq (decimal), the server TIME in
--          microseconds (decimal), prev (the newest token of the record's last before this
--          call, "" when it had none), this call's token, then one field per id invalidated
--          (none after a flush: the whole table). Ids hold no control bytes and tokens no "\n", so splitting on
--          "\n" is exact. A subscriber drops the named ids from its L1 (a writer that dropped
--          its own copies after its call may skip the ids of a message carrying its own token;
--          the Go cache gives its tokens a per-process prefix for that), and flushes the
--          table's L1 when the epoch changes, when seq is not the last one seen plus 1 (a lost
--          message), or when prev is not the token of the last message it applied: the record
--          went back in time (a restore from a snapshot, a lagging replica promoted), even if
--          new writes pushed seq past where it was.
-- FORMAT   shards   a table may spread its rows over N shards (N in [1, 256]; 1, the default,
--          is the unsharded layout). Shard i (a decimal in [0, N-1] without leading zeros) has
--          the hash tag {<table>#<i>} and the table's three key types under it: its rows
--          ecc:{<table>#<i>}:<id>, its record ecc:{<table>#<i>} and its channel
--          emq:{<table>#<i>}:inval. The row of id lives in shard CRC16-XMODEM(id) mod N (the
--          cluster's key hash, over the id's bytes). Each shard keeps its own record and
--          sequence (FORMAT inval applies per shard) and publishes on its own channel; every
--          script call is over one shard's keys, so it is single-slot. "#" is no name byte, so no
--          table's keys can be taken for a shard's.
-- REPLY    {epoch, seq}: the record after the bump (a string and an integer); or 0 when a
--          versioned row was refused because the row holds a higher version (nothing changed)
-- ERROR    ECCKEYS    the KEYS are not one table's (or one shard's) record and channel
-- ERROR    ECCARG     an ARGV does not meet its rule, or the count of ARGV is not 4
-- ERROR    ECCTYPE    the record holds another type than hash, or a seq that is not an integer
local tag = string.match(KEYS[1] or '', '^ecc:{([0-9A-Za-z_.%-]+#?%d*)}$')
local name, shard = string.match(tag or '', '^([^#]*)(.*)$')
if #KEYS ~= 2 or not tag or #name > 64 or shard ~= '' and not (shard == '#0' or string.match(shard, '^#[1-9]%d?%d?$') and tonumber(string.sub(shard, 2)) < 256) or KEYS[2] ~= 'emq:{' .. tag .. '}:inval' then
  return redis.error_reply('ECCKEYS expected ecc:{<table>} and emq:{<table>}:inval of one table, or ecc:{<table>#<shard>} and emq:{<table>#<shard>}:inval of one shard')
end
if #ARGV ~= 4 then return redis.error_reply('ECCARG expected 4 ARGV: token, px, id, row') end
local token, px, id, new = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
if #token ~= 16 or string.find(token, '[^0-9A-Za-z]') then
  return redis.error_reply('ECCARG token must be 16 bytes of [0-9A-Za-z]')
end
if #px > 15 or not string.match(px, '^[0-9]+$') or tonumber(px) < 1 then
  return redis.error_reply('ECCARG px must be an integer in [1, 999999999999999]')
end
if id == '' or #id > 512 or string.find(id, '[%z\1-\31\127]') then
  return redis.error_reply('ECCARG id must be 1 to 512 bytes without control bytes')
end
local head = string.sub(new, 1, 3)
if not (head == '\236\1V' and #new >= 31 or head == '\236\1W' and #new >= 39) or string.find(string.sub(new, 4, 19), '[^0-9A-Za-z]') then
  return redis.error_reply('ECCARG row must be a value row')
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
if head == '\236\1W' and redis.call('TYPE', KEYS[1] .. ':' .. id)['ok'] == 'string' then
  local cur = redis.call('GET', KEYS[1] .. ':' .. id)
  local ch, have = string.sub(cur, 1, 3), nil
  if ch == '\236\1W' and #cur >= 39 then
    have = string.sub(cur, 20, 27)
  elseif ch == '\236\1S' and #cur >= 55 then
    have = string.sub(cur, 36, 43)
  end
  if have then
    -- the versions are 8 bytes big-endian: compared byte by byte, exact over the whole uint64
    local want = string.sub(new, 20, 27)
    for i = 1, 8 do
      local a, b = string.byte(want, i), string.byte(have, i)
      if a < b then return 0 end
      if a > b then break end
    end
  end
end
local now = redis.call('TIME')
local us = now[1] .. string.format('%06d', tonumber(now[2]))
local epoch = rec[1]
local prev = string.sub(rec[2] or '', 1, 16)
local made = not epoch
if made then epoch = us .. '.' .. token end
redis.call('SET', KEYS[1] .. ':' .. id, new, 'PX', tonumber(px))
local seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
-- last is this call's token; ring field r<seq mod 64> is "<seq>:<token>" (FORMAT inval)
local sseq = string.format('%d', seq)
if made then
  redis.call('HSET', KEYS[1], 'epoch', epoch, 'last', token, 'r' .. (seq % 64), sseq .. ':' .. token)
else
  redis.call('HSET', KEYS[1], 'last', token, 'r' .. (seq % 64), sseq .. ':' .. token)
end
redis.call('SPUBLISH', KEYS[2], epoch .. '\n' .. sseq .. '\n' .. us .. '\n' .. prev .. '\n' .. token .. '\n' .. id)
return {epoch, seq}
