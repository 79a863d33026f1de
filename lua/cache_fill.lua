-- cache_fill: finish a fill: write the row only while it still holds the caller's token.
--
-- A filler owns a row through a token: a fill lease "\xEC\x01L" .. token, written with
-- SET NX PX before the loader ran, or an early-refresh claim "\xEC\x01R" .. token .. body
-- (cache_refresh). The new row is written only if the row still carries that token: a lease
-- that expired and was taken over, or that an invalidation deleted, refuses the write, so a
-- value loaded before an invalidation never lands in L2. An empty new row releases instead:
-- a lease row is deleted, a refresh claim is undone (the value stays, with its TTL).
--
-- The row format (cache/row.go), shared by cache_fill, cache_refresh and cache_reclaim:
-- value "\xEC\x01V" .. version (16 bytes: the writer's token) .. load time (4 bytes,
-- big-endian microseconds) .. payload; not found "\xEC\x01N" .. load time; fill lease
-- "\xEC\x01L" .. token; value claimed for refresh "\xEC\x01R" .. token .. the value row
-- without its first 3 bytes. Anything else is unreadable: readers treat it as a miss.
--
-- KEYS[1]  ecc:{<table>}:<id>      the L2 row
-- ARGV[1]  token                   the caller's token: 16 bytes
-- ARGV[2]  row                     the new row (header and payload), or the empty string to
--          release the caller's lease or refresh claim
-- ARGV[3]  px                      the new row's TTL in ms, an integer > 0; ignored on release
-- REPLY    1 when the row was written or the lease released; 0 when the row no longer holds
--          the caller's token (nothing is changed)
-- ERRORS   ECCARG when the token is not 16 bytes or px is not a positive integer
local token = ARGV[1]
if #token ~= 16 then return redis.error_reply('ECCARG token must be 16 bytes') end
local px = tonumber(ARGV[3])
if ARGV[2] ~= '' and (not px or px < 1 or px ~= math.floor(px)) then
  return redis.error_reply('ECCARG px must be a positive integer')
end
local cur = redis.call('GET', KEYS[1])
if not cur then return 0 end
local head = string.sub(cur, 1, 3)
if (head ~= '\236\1L' and head ~= '\236\1R') or string.sub(cur, 4, 19) ~= token then
  return 0
end
if ARGV[2] ~= '' then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
elseif head == '\236\1L' then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], '\236\1V' .. string.sub(cur, 20), 'KEEPTTL')
end
return 1
