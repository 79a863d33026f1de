-- cache_refresh: claim a value row for an early refresh (XFetch) without hiding its value.
--
-- Turns the value row "\xEC\x01V" .. version .. rest into "\xEC\x01R" .. token .. version ..
-- rest (a versioned value row "\xEC\x01W" .. into "\xEC\x01S" .., its value's version kept
-- where cache_set reads it) and keeps the row's TTL: readers still read the value, other processes see that a
-- refresh is under way and do not start their own, and the claimant finishes with
-- cache_fill (write the new row, or release the claim). The claim names the version it
-- refreshes: a row refreshed meanwhile is a new version and is not claimed again by a reader
-- of the old one. A claimant that dies leaves the claim until the row expires; the row is
-- then filled as usual. An invalidation that deletes the row voids the claim, so a refresh
-- loaded before it is never written.
--
-- KEYS[1]  ecc:{<table>}:<id>      the L2 row (FORMAT row), or ecc:{<table>#<shard>}:<id>
--          in a table spread over shards (FORMAT shards)
-- ARGV[1]  token    token  the claimant's token
-- ARGV[2]  version  token  the row version to refresh, as read from the row
-- FORMAT   row      see cache_fill.lua
-- FORMAT   shards   see cache_set.lua
-- REPLY    1 when claimed; 0 when the row is not an unclaimed value row of that version
--          (absent, not found, a fill lease, already claimed, another version, or
--          unreadable) and nothing was changed
-- ERROR    ECCKEYS    KEYS[1] is not a row key of the grammar
-- ERROR    ECCARG     an ARGV does not meet its rule, or the count of ARGV is not 2
-- ERROR    ECCTYPE    the key holds another type than string
local tag, id = string.match(KEYS[1] or '', '^ecc:{([0-9A-Za-z_.%-]+#?%d*)}:(.+)$')
local name, shard = string.match(tag or '', '^([^#]*)(.*)$')
if #KEYS ~= 1 or not tag or #name > 64 or shard ~= '' and not (shard == '#0' or string.match(shard, '^#[1-9]%d?%d?$') and tonumber(string.sub(shard, 2)) < 256) or #id > 512 or string.find(id, '[%z\1-\31\127]') then
  return redis.error_reply('ECCKEYS expected ecc:{<table>}:<id> or ecc:{<table>#<shard>}:<id>, a row key of the grammar')
end
if #ARGV ~= 2 then return redis.error_reply('ECCARG expected 2 ARGV: token, version') end
local token, version = ARGV[1], ARGV[2]
if #token ~= 16 or string.find(token, '[^0-9A-Za-z]') or #version ~= 16 or string.find(version, '[^0-9A-Za-z]') then
  return redis.error_reply('ECCARG token and version must be 16 bytes of [0-9A-Za-z]')
end
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'string' then
  return redis.error_reply('ECCTYPE ' .. KEYS[1] .. ' holds a ' .. kind .. ', not a string')
end
local cur = redis.call('GET', KEYS[1])
if not cur then return 0 end
local head = string.sub(cur, 1, 3)
if not (head == '\236\1V' and #cur >= 31 or head == '\236\1W' and #cur >= 39) then return 0 end
if string.sub(cur, 4, 19) ~= version then return 0 end
local claim = '\236\1R'
if head == '\236\1W' then claim = '\236\1S' end
redis.call('SET', KEYS[1], claim .. token .. string.sub(cur, 4), 'KEEPTTL')
return 1
