-- cache_flush: invalidate a whole table: delete its rows a batch at a time, then start a new
-- epoch.
--
-- Each call walks one SCAN step over the table's rows (MATCH on the table's hash tag, which
-- Valkey 8 confines to the table's slot on a cluster) and deletes what it finds. The call
-- whose step ends the walk (the returned cursor is "0") replaces the record's epoch with a new
-- one (server TIME and the caller's token), sets the record's last to the token (as
-- cache_set does), bumps the sequence and publishes
-- "<epoch>\n<seq>\n<server time in microseconds>\n<prev>\n<token>" with no ids: every
-- subscriber flushes the table's L1 on the epoch change. Rows are deleted before the epoch
-- moves, so an L1 refilled after the flush cannot copy a row from before it. The coherence
-- record itself is not a row (it has no ":" after the hash tag) and is kept.
--
-- KEYS[1]  ecc:{<table>}           the coherence record (hash: epoch, seq, last)
-- KEYS[2]  emq:{<table>}:inval     the table's invalidation channel
-- ARGV[1]  token                   16 bytes: names the new epoch
-- ARGV[2]  cursor                  the SCAN cursor: "0" to start, then what the last call
--          returned
-- ARGV[3]  limit                   SCAN's COUNT per call, an integer in [1, 10000]
-- DERIVES  ecc:{<table>}:<id>      each row found: KEYS[1] .. the rest of its key
-- REPLY    {cursor, deleted, epoch, seq}: cursor "0" when the walk ended (then epoch and seq
--          are the new record; otherwise they are "" and 0)
-- ERRORS   ECCKEYS when the KEYS are not one table's record and channel; ECCARG when the
--          token is not 16 bytes, the cursor is not a decimal or limit is out of range
local name = string.match(KEYS[1], '^ecc:{([%w_.%-]+)}$')
if not name or KEYS[2] ~= 'emq:{' .. name .. '}:inval' then
  return redis.error_reply('ECCKEYS expected ecc:{<table>} and emq:{<table>}:inval of one table')
end
if #ARGV[1] ~= 16 then return redis.error_reply('ECCARG token must be 16 bytes') end
if not string.match(ARGV[2], '^%d+$') then return redis.error_reply('ECCARG cursor must be a decimal') end
local limit = tonumber(ARGV[3])
if not limit or limit < 1 or limit > 10000 or limit ~= math.floor(limit) then
  return redis.error_reply('ECCARG limit must be an integer in [1, 10000]')
end
local res = redis.call('SCAN', ARGV[2], 'MATCH', KEYS[1] .. ':*', 'COUNT', limit)
local deleted = 0
for _, k in ipairs(res[2]) do
  if string.sub(k, 1, #KEYS[1] + 1) == KEYS[1] .. ':' then
    deleted = deleted + redis.call('DEL', KEYS[1] .. string.sub(k, #KEYS[1] + 1))
  end
end
if res[1] ~= '0' then return {res[1], deleted, '', 0} end
local now = redis.call('TIME')
local us = now[1] .. string.format('%06d', tonumber(now[2]))
local epoch = us .. '.' .. ARGV[1]
local prev = redis.call('HGET', KEYS[1], 'last') or ''
redis.call('HSET', KEYS[1], 'epoch', epoch, 'last', ARGV[1])
local seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
redis.call('SPUBLISH', KEYS[2], epoch .. '\n' .. seq .. '\n' .. us .. '\n' .. prev .. '\n' .. ARGV[1])
return {'0', deleted, epoch, seq}
