-- cache_flush: invalidate a whole table: delete its rows a batch at a time, then start a new
-- epoch.
--
-- Each call walks one SCAN step over the table's rows (MATCH on the table's hash tag, which
-- Valkey 8 confines to the table's slot on a cluster) and deletes what it finds. The call
-- whose step ends the walk (the returned cursor is "0") replaces the record's epoch with a new
-- one (server TIME and the caller's token), bumps the sequence and publishes a message with
-- no ids: every subscriber flushes the table's L1 on the epoch change. Rows are deleted before
-- the epoch moves, so an L1 refilled after the flush cannot copy a row from before it. The
-- coherence record itself is not a row (it has no ":" after the hash tag) and is kept.
--
-- KEYS[1]  ecc:{<table>}           the coherence record (FORMAT inval), or a shard's
--          ecc:{<table>#<shard>} for a table spread over shards (FORMAT shards)
-- KEYS[2]  emq:{<table>}:inval     the table's invalidation channel (FORMAT inval), or the
--          shard's emq:{<table>#<shard>}:inval, of the same tag as KEYS[1]
-- ARGV[1]  token   token             unique per call: names the new epoch, and becomes the
--          record's last and its ring entry (FORMAT inval)
-- ARGV[2]  cursor  cursor            "0" to start, then what the last call returned
-- ARGV[3]  limit   uint[1,10000]     SCAN's COUNT per call. The Go cache passes 1000
-- ARGV[4]  server  bytes[40,40]      optional: the server of the cursor, as the call that
--          returned it replied (40 bytes of [0-9a-f]). A cursor is a place in one server
--          process's table: when server is not this server's run_id (a restart, a failover, a
--          slot moved), the walk starts again from "0". The Go cache passes it when it resumes
--          a walk that an earlier reconcile could not finish
-- DERIVES  ecc:{<table>}:<id>      each row found: KEYS[1] .. the rest of its key
-- FORMAT   inval    see cache_set.lua
-- FORMAT   shards   see cache_set.lua
-- REPLY    {cursor, deleted, epoch, seq, server}: cursor "0" when the walk ended (then epoch
--          and seq are the new record; otherwise they are "" and 0); deleted counts this call's
--          rows; server is this server's run_id (INFO server), which a later call that resumes
--          the walk passes back as ARGV[4]
-- ERROR    ECCKEYS    the KEYS are not one table's (or one shard's) record and channel
-- ERROR    ECCARG     an ARGV does not meet its rule, or the count of ARGV is not 3 or 4
-- ERROR    ECCTYPE    the record holds another type than hash, or a seq that is not an integer
local tag = string.match(KEYS[1] or '', '^ecc:{([0-9A-Za-z_.%-]+#?%d*)}$')
local name, shard = string.match(tag or '', '^([^#]*)(.*)$')
if #KEYS ~= 2 or not tag or #name > 64 or shard ~= '' and not (shard == '#0' or string.match(shard, '^#[1-9]%d?%d?$') and tonumber(string.sub(shard, 2)) < 256) or KEYS[2] ~= 'emq:{' .. tag .. '}:inval' then
  return redis.error_reply('ECCKEYS expected ecc:{<table>} and emq:{<table>}:inval of one table, or ecc:{<table>#<shard>} and emq:{<table>#<shard>}:inval of one shard')
end
if #ARGV ~= 3 and #ARGV ~= 4 then return redis.error_reply('ECCARG expected 3 or 4 ARGV: token, cursor, limit, server') end
local token, cursor, limit, from = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
if #token ~= 16 or string.find(token, '[^0-9A-Za-z]') then
  return redis.error_reply('ECCARG token must be 16 bytes of [0-9A-Za-z]')
end
if #cursor > 20 or not string.match(cursor, '^[0-9]+$') or #cursor == 20 and cursor > '18446744073709551615' then
  return redis.error_reply('ECCARG cursor must be a decimal in [0, 18446744073709551615]')
end
if #limit > 5 or not string.match(limit, '^[0-9]+$') or tonumber(limit) < 1 or tonumber(limit) > 10000 then
  return redis.error_reply('ECCARG limit must be an integer in [1, 10000]')
end
if from and not (#from == 40 and string.match(from, '^[0-9a-f]+$')) then
  return redis.error_reply('ECCARG server must be 40 bytes of [0-9a-f]')
end
-- A SCAN cursor is a place in one server process's table: from another process (a restart, a
-- failover, a slot moved) it would skip keys, so the walk starts again.
local server = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)') or ''
if from and from ~= server then cursor = '0' end
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'hash' then
  return redis.error_reply('ECCTYPE ' .. KEYS[1] .. ' holds a ' .. kind .. ', not a hash')
end
-- seq is what HINCRBY bumps when the walk ends, after rows were deleted: one it cannot bump
-- refuses the call before any row goes.
local seq0 = kind == 'hash' and redis.call('HGET', KEYS[1], 'seq')
if seq0 and not (seq0 == '0' or #seq0 <= 18 and string.match(seq0, '^%-?[1-9][0-9]*$')) then
  return redis.error_reply('ECCTYPE ' .. KEYS[1] .. ' holds a seq that is not an integer')
end
local res = redis.call('SCAN', cursor, 'MATCH', KEYS[1] .. ':*', 'COUNT', limit)
local deleted = 0
for _, k in ipairs(res[2]) do
  if string.sub(k, 1, #KEYS[1] + 1) == KEYS[1] .. ':' then
    deleted = deleted + redis.call('DEL', KEYS[1] .. string.sub(k, #KEYS[1] + 1))
  end
end
if res[1] ~= '0' then return {res[1], deleted, '', 0, server} end
local now = redis.call('TIME')
local us = now[1] .. string.format('%06d', tonumber(now[2]))
local epoch = us .. '.' .. token
local prev = string.sub(redis.call('HGET', KEYS[1], 'last') or '', 1, 16)
local seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
local sseq = string.format('%d', seq)
redis.call('HSET', KEYS[1], 'epoch', epoch, 'last', token, 'r' .. (seq % 64), sseq .. ':' .. token)
redis.call('SPUBLISH', KEYS[2], epoch .. '\n' .. sseq .. '\n' .. us .. '\n' .. prev .. '\n' .. token)
return {'0', deleted, epoch, seq, server}
