-- cache_invalidate: delete rows, bump the table's sequence, publish the invalidation.
--
-- The record and the message are as in cache_set: the message is "<epoch>\n<seq>\n<server
-- time in microseconds>\n<prev>\n<token>" followed by "\n<id>" per id, one sequence number
-- for the whole call; the record's last becomes this call's token.
-- Deleting a row also deletes a fill lease on it, so a fill that began before this call
-- cannot write the value it loaded. The caller sends at most a few hundred ids per call.
--
-- KEYS[1]  ecc:{<table>}           the coherence record (hash: epoch, seq, last)
-- KEYS[2]  emq:{<table>}:inval     the table's invalidation channel
-- ARGV[1]  token                   16 bytes, unique per call: names a new epoch if the record
--          is missing, and becomes the record's last
-- ARGV[2]  id                      the first id (row-key form, validated by the caller);
--          more ids follow as ARGV[3], ARGV[4], ...
-- DERIVES  ecc:{<table>}:<id>      each row: KEYS[1] .. ":" .. id
-- REPLY    {epoch, seq}: the record after the bump
-- ERRORS   ECCKEYS when the KEYS are not one table's record and channel; ECCARG when the
--          token is not 16 bytes, no id is given or an id is empty
local name = string.match(KEYS[1], '^ecc:{([%w_.%-]+)}$')
if not name or KEYS[2] ~= 'emq:{' .. name .. '}:inval' then
  return redis.error_reply('ECCKEYS expected ecc:{<table>} and emq:{<table>}:inval of one table')
end
if #ARGV[1] ~= 16 then return redis.error_reply('ECCARG token must be 16 bytes') end
if #ARGV < 2 then return redis.error_reply('ECCARG no id') end
for i = 2, #ARGV do
  if ARGV[i] == '' then return redis.error_reply('ECCARG empty id') end
end
local now = redis.call('TIME')
local us = now[1] .. string.format('%06d', tonumber(now[2]))
local epoch = redis.call('HGET', KEYS[1], 'epoch')
if not epoch then
  epoch = us .. '.' .. ARGV[1]
  redis.call('HSET', KEYS[1], 'epoch', epoch)
end
local prev = redis.call('HGET', KEYS[1], 'last') or ''
local msg = {epoch, '', us, prev, ARGV[1]}
for i = 2, #ARGV do
  redis.call('DEL', KEYS[1] .. ':' .. ARGV[i])
  msg[#msg + 1] = ARGV[i]
end
redis.call('HSET', KEYS[1], 'last', ARGV[1])
local seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
msg[2] = tostring(seq)
redis.call('SPUBLISH', KEYS[2], table.concat(msg, '\n'))
return {epoch, seq}
