-- cache_reclaim: replace a row the caller could not read with the caller's fill lease.
--
-- A row from another format version, a foreign writer or corrupt bytes blocks SET NX, so a
-- filler that read one claims the row here instead: only if the row is still exactly what
-- it read (compared by SHA1, so the bytes need not travel back) does it write its fill lease
-- "\xEC\x01L" .. token with the lease's TTL.
--
-- KEYS[1]  ecc:{<table>}:<id>      the L2 row (FORMAT row), or ecc:{<table>#<shard>}:<id>
--          in a table spread over shards (FORMAT shards)
-- ARGV[1]  sha1      sha1   SHA1 of the row as the caller read it
-- ARGV[2]  token     token  the caller's token
-- ARGV[3]  lease_ms  uint[1,999999999999999]  the lease's TTL in ms. The Go cache passes the
--          table's LeaseTTL
-- FORMAT   row      see cache_fill.lua
-- FORMAT   shards   see cache_set.lua
-- REPLY    1 when the lease was written; 0 when the row changed (or vanished) since the
--          caller read it, and nothing was changed
-- ERROR    ECCKEYS    KEYS[1] is not a row key of the grammar
-- ERROR    ECCARG     an ARGV does not meet its rule, or the count of ARGV is not 3
-- ERROR    ECCTYPE    the key holds another type than string
local tag, id = string.match(KEYS[1] or '', '^ecc:{([0-9A-Za-z_.%-]+#?%d*)}:(.+)$')
local name, shard = string.match(tag or '', '^([^#]*)(.*)$')
if #KEYS ~= 1 or not tag or #name > 64 or shard ~= '' and not (shard == '#0' or string.match(shard, '^#[1-9]%d?%d?$') and tonumber(string.sub(shard, 2)) < 256) or #id > 512 or string.find(id, '[%z\1-\31\127]') then
  return redis.error_reply('ECCKEYS expected ecc:{<table>}:<id> or ecc:{<table>#<shard>}:<id>, a row key of the grammar')
end
if #ARGV ~= 3 then return redis.error_reply('ECCARG expected 3 ARGV: sha1, token, lease_ms') end
local sum, token, ms = ARGV[1], ARGV[2], ARGV[3]
if #sum ~= 40 or string.find(sum, '[^0-9a-f]') then
  return redis.error_reply('ECCARG sha1 must be 40 bytes of [0-9a-f]')
end
if #token ~= 16 or string.find(token, '[^0-9A-Za-z]') then
  return redis.error_reply('ECCARG token must be 16 bytes of [0-9A-Za-z]')
end
if #ms > 15 or not string.match(ms, '^[0-9]+$') or tonumber(ms) < 1 then
  return redis.error_reply('ECCARG lease_ms must be an integer in [1, 999999999999999]')
end
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'string' then
  return redis.error_reply('ECCTYPE ' .. KEYS[1] .. ' holds a ' .. kind .. ', not a string')
end
local cur = redis.call('GET', KEYS[1])
if not cur or redis.sha1hex(cur) ~= sum then return 0 end
redis.call('SET', KEYS[1], '\236\1L' .. token, 'PX', tonumber(ms))
return 1
