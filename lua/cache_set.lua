-- cache_set: write-through: write one row, bump the table's sequence, publish the invalidation.
--
-- The table's coherence record ecc:{<table>} holds its epoch (an id made when the record is
-- missing: server TIME and the caller's token, so a record lost to FLUSHALL or a restart
-- without persistence comes back as a new epoch) and its sequence, bumped by one per
-- invalidation. The row is written over whatever is there: a fill lease loses its token, so
-- the filler's cache_fill is refused and the value it loaded before this write never lands.
-- The record's field last holds the token of the last write (ARGV[1]); each message names
-- the token before it (prev, "" when the record had none) and its own, so a subscriber can
-- tell a record that went back in time (a restore from a snapshot, a promoted replica that
-- lagged) from a duplicate even when new writes pushed the sequence past where it was.
-- The message is "<epoch>\n<seq>\n<server time in microseconds>\n<prev>\n<token>\n<id>",
-- published on the table's channel from the same slot, so every subscriber sees the
-- sequence in order. The row key is derived from KEYS[1]: the record's key, ":", the id.
--
-- KEYS[1]  ecc:{<table>}           the coherence record (hash: epoch, seq, last)
-- KEYS[2]  emq:{<table>}:inval     the table's invalidation channel
-- ARGV[1]  token                   16 bytes, unique per call: names a new epoch if the record
--          is missing, and becomes the record's last
-- ARGV[2]  px                      the row's TTL in ms, an integer > 0
-- ARGV[3]  id                      the row id (row-key form, validated by the caller)
-- ARGV[4]  row                     the new row (header and payload, see cache/row.go)
-- DERIVES  ecc:{<table>}:<id>      the row: KEYS[1] .. ":" .. id
-- REPLY    {epoch, seq}: the record after the bump
-- ERRORS   ECCKEYS when the KEYS are not one table's record and channel; ECCARG when the
--          token is not 16 bytes, px is not a positive integer or the id is empty
local name = string.match(KEYS[1], '^ecc:{([%w_.%-]+)}$')
if not name or KEYS[2] ~= 'emq:{' .. name .. '}:inval' then
  return redis.error_reply('ECCKEYS expected ecc:{<table>} and emq:{<table>}:inval of one table')
end
if #ARGV[1] ~= 16 then return redis.error_reply('ECCARG token must be 16 bytes') end
local px = tonumber(ARGV[2])
if not px or px < 1 or px ~= math.floor(px) then
  return redis.error_reply('ECCARG px must be a positive integer')
end
if ARGV[3] == '' then return redis.error_reply('ECCARG empty id') end
local now = redis.call('TIME')
local us = now[1] .. string.format('%06d', tonumber(now[2]))
local epoch = redis.call('HGET', KEYS[1], 'epoch')
if not epoch then
  epoch = us .. '.' .. ARGV[1]
  redis.call('HSET', KEYS[1], 'epoch', epoch)
end
redis.call('SET', KEYS[1] .. ':' .. ARGV[3], ARGV[4], 'PX', ARGV[2])
local prev = redis.call('HGET', KEYS[1], 'last') or ''
redis.call('HSET', KEYS[1], 'last', ARGV[1])
local seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
redis.call('SPUBLISH', KEYS[2], epoch .. '\n' .. seq .. '\n' .. us .. '\n' .. prev .. '\n' .. ARGV[1] .. '\n' .. ARGV[3])
return {epoch, seq}
