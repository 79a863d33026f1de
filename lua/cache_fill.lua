-- cache_fill: finish a fill: write the row only while it still holds the caller's token.
--
-- A filler owns a row through a token: a fill lease "\xEC\x01L" .. token, written with
-- SET NX PX before the loader ran (or by cache_reclaim), or an early-refresh claim
-- "\xEC\x01R" .. token .. body (cache_refresh). The new row is written only if the row still
-- carries that token: a lease that expired and was taken over, or that an invalidation
-- deleted, refuses the write, so a value loaded before an invalidation never lands in L2. An
-- empty new row releases instead: a lease row is deleted, a refresh claim is undone (the
-- value stays, with its TTL).
--
-- A fill of a versioned table writes a versioned row (W) carrying the loaded value's version.
-- No version is compared here: a fill writes only over its own lease or claim, and any
-- cache_set or invalidation of the row replaces or deletes it first, so a fill never replaces
-- a row that a write made after the fill began (the loaded value, read before that write, is
-- refused whatever its version). The version travels so that a later cache_set of an older
-- value is refused over the filled row.
--
-- KEYS[1]  ecc:{<table>}:<id>      the L2 row (FORMAT row), or ecc:{<table>#<shard>}:<id>
--          in a table spread over shards (FORMAT shards)
-- ARGV[1]  token  token  the caller's token: its fill lease's or its refresh claim's
-- ARGV[2]  row    row?   the new row: a value row (V or W) whose version is the token, or a
--          not-found row; "" releases the caller's lease or refresh claim
-- ARGV[3]  px     uint[1,999999999999999]  the new row's TTL in ms; checked but unused on a
--          release. The Go cache passes the table's TTL (NegativeTTL for a not-found row)
--          minus its jitter, and 1 on a release
-- FORMAT   row      an L2 row opens with 3 bytes: \xEC (magic), \x01 (the format version), the
--          kind. Value: "\xEC\x01V", version (16 bytes of [0-9A-Za-z]: the token of the fill
--          or the write that made it), load time (4 bytes, big-endian: the microseconds the
--          loader took), expiry hint (8 bytes, big-endian: unix ms by the writer's clock, a
--          hint that is never used as a deadline), payload (the table's codec; may be empty).
--          Versioned value: "\xEC\x01W", the same 16-byte version (the writer's token), the
--          value's version (8 bytes, big-endian: an unsigned 64-bit number the table reads
--          from the value, which cache_set compares), then load time, expiry hint and payload
--          as in a value row; 39 bytes at least. Not found: "\xEC\x01N" and the load time, 7
--          bytes in all. Fill lease: "\xEC\x01L" and the filler's token, 19 bytes in all,
--          written with SET NX PX before the loader runs. Refreshing: "\xEC\x01R" (of a value
--          row) or "\xEC\x01S" (of a versioned value row), the claimant's token, then the row
--          without its first 3 bytes. Anything else is unreadable: readers treat it as a miss
--          and replace it through cache_reclaim (a reader that predates the versioned kinds
--          reads W and S rows so). The Go cache makes tokens of 16 random [0-9A-Za-z].
-- FORMAT   shards   see cache_set.lua
-- REPLY    1 when the row was written or the lease released; 0 when the row no longer holds
--          the caller's token (nothing is changed)
-- ERROR    ECCKEYS    KEYS[1] is not a row key of the grammar
-- ERROR    ECCARG     an ARGV does not meet its rule, the row's version is not the token, or
--          the count of ARGV is not 3
-- ERROR    ECCTYPE    the key holds another type than string
local tag, id = string.match(KEYS[1] or '', '^ecc:{([0-9A-Za-z_.%-]+#?%d*)}:(.+)$')
local name, shard = string.match(tag or '', '^([^#]*)(.*)$')
if #KEYS ~= 1 or not tag or #name > 64 or shard ~= '' and not (shard == '#0' or string.match(shard, '^#[1-9]%d?%d?$') and tonumber(string.sub(shard, 2)) < 256) or #id > 512 or string.find(id, '[%z\1-\31\127]') then
  return redis.error_reply('ECCKEYS expected ecc:{<table>}:<id> or ecc:{<table>#<shard>}:<id>, a row key of the grammar')
end
if #ARGV ~= 3 then return redis.error_reply('ECCARG expected 3 ARGV: token, row, px') end
local token, new, px = ARGV[1], ARGV[2], ARGV[3]
if #token ~= 16 or string.find(token, '[^0-9A-Za-z]') then
  return redis.error_reply('ECCARG token must be 16 bytes of [0-9A-Za-z]')
end
if new ~= '' then
  local head = string.sub(new, 1, 3)
  if not ((head == '\236\1V' and #new >= 31 or head == '\236\1W' and #new >= 39) and string.sub(new, 4, 19) == token or head == '\236\1N' and #new == 7) then
    return redis.error_reply('ECCARG row must be a value row whose version is the token, or a not-found row')
  end
end
if #px > 15 or not string.match(px, '^[0-9]+$') or tonumber(px) < 1 then
  return redis.error_reply('ECCARG px must be an integer in [1, 999999999999999]')
end
-- One read answers both the row's type and its bytes: a key of another type fails the GET,
-- and only then is TYPE asked, for the error's text.
local cur = redis.pcall('GET', KEYS[1])
if type(cur) == 'table' and cur['err'] then
  return redis.error_reply('ECCTYPE ' .. KEYS[1] .. ' holds a ' .. redis.call('TYPE', KEYS[1])['ok'] .. ', not a string')
end
if not cur then return 0 end
local head = string.sub(cur, 1, 3)
if (head ~= '\236\1L' and head ~= '\236\1R' and head ~= '\236\1S') or string.sub(cur, 4, 19) ~= token then
  return 0
end
if new ~= '' then
  redis.call('SET', KEYS[1], new, 'PX', tonumber(px))
elseif head == '\236\1L' then
  redis.call('DEL', KEYS[1])
elseif head == '\236\1R' then
  redis.call('SET', KEYS[1], '\236\1V' .. string.sub(cur, 20), 'KEEPTTL')
else
  redis.call('SET', KEYS[1], '\236\1W' .. string.sub(cur, 20), 'KEEPTTL')
end
return 1
