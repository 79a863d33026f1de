-- cache_reclaim: replace a row the caller could not read with the caller's fill lease.
--
-- A row from another format version, a foreign writer or corrupt bytes blocks SET NX, so a
-- filler that read one claims the row here instead: only if the row is still exactly what
-- it read (compared by SHA1, so the bytes need not travel back) does it write its fill lease
-- "\xEC\x01L" .. token with the lease's TTL. The row format is documented in cache/row.go.
--
-- KEYS[1]  ecc:{<table>}:<id>      the L2 row
-- ARGV[1]  sha1                    hex SHA1 (lower case) of the row as the caller read it
-- ARGV[2]  token                   the caller's token: 16 bytes
-- ARGV[3]  lease_ms                the lease's TTL in ms, an integer > 0
-- REPLY    1 when the lease was written; 0 when the row changed (or vanished) since the
--          caller read it, and nothing was changed
-- ERRORS   ECCARG when the token is not 16 bytes or lease_ms is not a positive integer
local token = ARGV[2]
if #token ~= 16 then return redis.error_reply('ECCARG token must be 16 bytes') end
local ms = tonumber(ARGV[3])
if not ms or ms < 1 or ms ~= math.floor(ms) then
  return redis.error_reply('ECCARG lease_ms must be a positive integer')
end
local cur = redis.call('GET', KEYS[1])
if not cur or redis.sha1hex(cur) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], '\236\1L' .. token, 'PX', ARGV[3])
return 1
