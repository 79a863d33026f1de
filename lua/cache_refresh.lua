-- cache_refresh: claim a value row for an early refresh (XFetch) without hiding its value.
--
-- Turns the value row "\xEC\x01V" .. version .. rest into "\xEC\x01R" .. token .. version ..
-- rest and keeps the row's TTL: readers still read the value, other processes see that a
-- refresh is under way and do not start their own, and the claimant finishes with
-- cache_fill (write the new row, or release the claim). The claim names the version it
-- refreshes: a row refreshed meanwhile is a new version and is not claimed again by a reader
-- of the old one. A claimant that dies leaves the claim until the row expires; the row is
-- then filled as usual. An invalidation that deletes the row voids the claim, so a refresh
-- loaded before it is never written. The row format is documented in cache/row.go.
--
-- KEYS[1]  ecc:{<table>}:<id>      the L2 row
-- ARGV[1]  token                   the claimant's token: 16 bytes
-- ARGV[2]  version                 the row version to refresh (16 bytes, from the row)
-- REPLY    1 when claimed; 0 when the row is not an unclaimed value row of that version
--          (absent, not found, a fill lease, already claimed, another version, or
--          unreadable) and nothing was changed
-- ERRORS   ECCARG when the token or the version is not 16 bytes
local token = ARGV[1]
if #token ~= 16 or #ARGV[2] ~= 16 then
  return redis.error_reply('ECCARG token and version must be 16 bytes')
end
local cur = redis.call('GET', KEYS[1])
if not cur or #cur < 23 or string.sub(cur, 1, 3) ~= '\236\1V' then return 0 end
if string.sub(cur, 4, 19) ~= ARGV[2] then return 0 end
redis.call('SET', KEYS[1], '\236\1R' .. token .. string.sub(cur, 4), 'KEEPTTL')
return 1
